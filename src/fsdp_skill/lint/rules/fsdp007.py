"""FSDP007: gradients reduced in low precision (reduce_dtype fp16 or bf16)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, has_splat, is_under
from fsdp_skill.lint.rules._api import DTYPES, dtype_of, last, policy_calls

if TYPE_CHECKING:
    from fsdp_skill.lint.edits import Edit, Text

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


def edit(m: FileModel, node: ast.AST, text: Text) -> list[Edit] | None:
    """``reduce_dtype=torch.float32``: the low-precision value replaced, or the keyword added
    after the last argument; only when the dtype is spelled ``<torch module>.<dtype>`` here
    (a dtype that comes from a variable or a config is not rewritten)."""
    from fsdp_skill.lint.edits import Edit

    if not isinstance(node, ast.Call):
        return None
    reduce_expr = call_arg(node, 1, "reduce_dtype")
    if reduce_expr is not None:
        if not _torch_dtype(m, reduce_expr):
            return None
        start, end = text.span(reduce_expr)
        replacement = f"{text.segment(reduce_expr.value)}.float32"
        return [Edit(start, end, replacement, "reduce_dtype set to float32")]
    param = call_arg(node, 0, "param_dtype")
    arguments = [*node.args, *node.keywords]
    if not _torch_dtype(m, param) or not arguments:
        return None
    end = max(text.span(a)[1] for a in arguments)
    addition = f", reduce_dtype={text.segment(param.value)}.float32"
    return [Edit(end, end, addition, "reduce_dtype=float32 added")]


def _torch_dtype(m: FileModel, expr: ast.expr | None) -> bool:
    """True for ``torch.bfloat16`` and the like: an attribute of an imported torch module."""
    if not isinstance(expr, ast.Attribute) or expr.attr not in DTYPES:
        return False
    name = m.qualname(expr) or ""
    return is_under(name, "torch") and name.count(".") == 1
