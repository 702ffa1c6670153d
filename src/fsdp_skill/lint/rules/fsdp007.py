"""FSDP007: gradients reduced in low precision (reduce_dtype fp16 or bf16)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, has_splat
from fsdp_skill.lint.rules._api import dtype_of, last, policy_calls

CODE = "FSDP007"
PITFALL = "low-precision-gradient-reduction"
SEVERITY = "warning"
SUMMARY = "gradients reduced in fp16/bf16"

_NAMES = {"fp16": "float16", "bf16": "bfloat16"}


def fix(version: tuple[int, int]) -> str:
    return "pass reduce_dtype=torch.float32 to the mixed-precision policy"


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    for call in policy_calls(m):
        if has_splat(call.node):
            continue
        policy = last(m.call_name(call))
        reduce_expr = call_arg(call.node, 1, "reduce_dtype")
        if reduce_expr is not None:
            dtype = dtype_of(m, reduce_expr, call.func)
            if dtype in _NAMES:
                yield (
                    call.node,
                    (
                        f"{policy}(reduce_dtype={_NAMES[dtype]}): gradients are summed across "
                        "ranks in low precision and lose accuracy as the world grows"
                    ),
                )
            continue
        dtype = dtype_of(m, call_arg(call.node, 0, "param_dtype"), call.func)
        if dtype in _NAMES:
            yield (
                call.node,
                (
                    f"{policy}(param_dtype={_NAMES[dtype]}) without reduce_dtype: the reduction "
                    f"defaults to {_NAMES[dtype]}, so gradients are summed in low precision"
                ),
            )
