"""FSDP006: fp16 mixed precision with no gradient scaler."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg
from fsdp_skill.lint.rules._api import dtype_of, policy_calls

CODE = "FSDP006"
PITFALL = "fp16-without-grad-scaler"
SEVERITY = "error"
SUMMARY = "fp16 mixed precision without a gradient scaler"


def fix(version: tuple[int, int]) -> str:
    return (
        f"prefer bf16; with fp16 scale the loss: {versions.grad_scaler(version)} with FSDP2 "
        "(fully_shard), ShardedGradScaler (from torch.distributed.fsdp.sharded_grad_scaler) "
        "with FSDP1"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if m.identifiers & {"ShardedGradScaler", "GradScaler"}:
        return
    for call in policy_calls(m):
        if dtype_of(m, call_arg(call.node, 0, "param_dtype"), call.func) == "fp16":
            yield (
                call.node,
                (
                    "param_dtype=float16 with no gradient scaler in this file: small gradients "
                    "underflow to zero and large ones overflow to inf"
                ),
            )
            return
