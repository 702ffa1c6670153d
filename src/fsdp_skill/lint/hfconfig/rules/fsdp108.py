"""FSDP108: a setting whose required companion is off, so the launch stops
(fsdp_cpu_ram_efficient_loading without fsdp_sync_module_states, activation-checkpoint
offload without activation checkpointing)."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at
from fsdp_skill.lint.hfconfig.rules._needs import unmet

CODE = "FSDP108"
PITFALL = "accelerate-setting-needs-companion"
SEVERITY = "error"
SUMMARY = "FSDP setting whose required companion setting is off: the launch stops"


def fix(version: tuple[int, int]) -> str:
    return (
        "turn the companion on (fsdp_sync_module_states: true with "
        "fsdp_cpu_ram_efficient_loading; fsdp_activation_checkpointing: true with its offload), "
        "or turn the setting off"
    )


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if not ctx.doc.is_accelerate:
        return
    for key, other, wanted, have in unmet(ctx, "rejected"):
        entry = ctx.doc.fsdp.get(other) or ctx.doc.fsdp.get(key) or ctx.doc.anchor()
        if entry is None:
            continue
        written = "" if key in ctx.doc.fsdp else " (on by default)"
        yield at(
            entry,
            f"`{key}`{written} needs `{other}: {wanted}` but it is {have}: `accelerate launch` "
            "stops with a ValueError before the script starts",
        )
