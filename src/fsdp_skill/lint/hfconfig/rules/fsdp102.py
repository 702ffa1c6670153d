"""FSDP102: a top-level key that makes `accelerate launch` refuse the config file."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig import data
from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at, did_you_mean

CODE = "FSDP102"
PITFALL = "accelerate-config-unknown-top-level-key"
SEVERITY = "error"
SUMMARY = "accelerate config file with a top-level key accelerate refuses"


def fix(version: tuple[int, int]) -> str:
    return "remove the key or move it where it belongs (FSDP settings go under fsdp_config:)"


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if not ctx.doc.is_accelerate:
        return
    keys, legacy = data.accelerate_top_level()
    fsdp_keys = data.accelerate_keys()
    for key, entry in ctx.doc.top.items():
        if key in keys or key in legacy:
            continue
        if key in fsdp_keys:
            hint = " (an FSDP setting: indent it under fsdp_config:)"
        else:
            hint = did_you_mean(key, keys)
        yield at(
            entry,
            f"`{key}` is not a key of an accelerate config file: `accelerate launch` stops with "
            f'"The config file ... had unknown keys"{hint}',
        )
