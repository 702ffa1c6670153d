"""FSDP010: torch.nn.utils.clip_grad_norm_ on an FSDP1 module."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg

CODE = "FSDP010"
PITFALL = "fsdp1-generic-clip-grad-norm"
SEVERITY = "error"
SUMMARY = "torch.nn.utils.clip_grad_norm_ on an FSDP1 module"


def fix(version: tuple[int, int]) -> str:
    return "call model.clip_grad_norm_(max_norm) on the FSDP1 root module instead"


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("FullyShardedDataParallel"):
        return
    for call in m.calls_to("clip_grad_norm_", "clip_grad_norm", module="torch.nn.utils"):
        for owner in m.parameter_owners(call_arg(call.node, 0, "parameters"), call.func):
            # a model that may be FSDP1 or FSDP2 (a version switch) is not certain: skip
            if m.shard_kinds(owner, call.func) == {"fsdp1"}:
                yield (
                    call.node,
                    (
                        f"torch.nn.utils.clip_grad_norm_ on FSDP1 module `{owner}`: each rank "
                        "sees only its shard, so the norm is wrong and ranks clip differently"
                    ),
                )
                break
