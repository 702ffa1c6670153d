"""FSDP111: FSDP settings in an accelerate config whose distributed_type is not FSDP."""

from __future__ import annotations

from collections.abc import Iterator

from fsdp_skill.lint.hfconfig.context import Context
from fsdp_skill.lint.hfconfig.rules import at

CODE = "FSDP111"
PITFALL = "accelerate-fsdp-config-without-fsdp"
SEVERITY = "warning"
SUMMARY = "fsdp_config settings in an accelerate config whose distributed_type is not FSDP"


def fix(version: tuple[int, int]) -> str:
    return "set distributed_type: FSDP, or remove the fsdp_config section"


def check(ctx: Context) -> Iterator[tuple[int, int, str]]:
    if not ctx.doc.is_accelerate or ctx.fsdp_enabled or not ctx.doc.fsdp:
        return
    distributed = ctx.doc.top.get("distributed_type")
    entry = ctx.doc.fsdp_entry
    if entry is None:
        return
    kind = distributed.value if distributed is not None else "(missing)"
    yield at(
        entry,
        f"fsdp_config is ignored: distributed_type is {kind}, so `accelerate launch` does not "
        "use FSDP and exports none of these settings",
    )
