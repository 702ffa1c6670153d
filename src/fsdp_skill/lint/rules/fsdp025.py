"""FSDP025: an FSDP optimizer-state conversion computed and then discarded."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel

CODE = "FSDP025"
PITFALL = "discarded-optim-state-result"
SEVERITY = "error"
SUMMARY = "FSDP optimizer-state conversion result discarded"

CONVERSIONS = {
    "scatter_full_optim_state_dict",
    "shard_full_optim_state_dict",
    "optim_state_dict_to_load",
    "flatten_sharded_optim_state_dict",
    "rekey_optim_state_dict",
}


def fix(version: tuple[int, int]) -> str:
    return (
        "keep the result and load it: optimizer.load_state_dict("
        "FSDP.optim_state_dict_to_load(model, optimizer, full_osd))"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses(*CONVERSIONS):
        return
    for call in m.calls_to(*CONVERSIONS, module="torch.distributed.fsdp"):
        if id(call.node) in m.discarded:
            tail = call.name.rsplit(".", 1)[-1]
            yield (
                call.node,
                (
                    f"the result of {tail}(...) is discarded: it returns the state dict to "
                    "load, it does not load it into the optimizer"
                ),
            )
