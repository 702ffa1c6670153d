"""FSDP020: gradients clipped after ``scaler.scale(loss).backward()`` without unscaling."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import key_of, last_name

CODE = "FSDP020"
PITFALL = "clip-before-unscale"
SEVERITY = "error"
SUMMARY = "gradients clipped while still scaled by the GradScaler"

_SCALERS = ("GradScaler", "ShardedGradScaler")


def fix(version: tuple[int, int]) -> str:
    return "call scaler.unscale_(optimizer) after backward and before clip_grad_norm_"


def _scaled_backwards(m: FileModel):
    """(call, scaler key) for ``<scaler>.scale(loss).backward()``."""
    for call in m.calls:
        node = call.node
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "backward"):
            continue
        inner = f.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
            if inner.func.attr == "scale":
                key = key_of(inner.func.value)
                if key is not None and _is_scaler(m, key, call.func):
                    yield call, key


def _is_scaler(m: FileModel, key: str, func) -> bool:
    for a in m.values_of(key, func):
        if isinstance(a.value, ast.Call) and (last_name(a.value.func) or "") in _SCALERS:
            return True
    return "scaler" in key.lower()


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if "unscale_" in m.identifiers or not m.uses("clip_grad_norm_", "clip_grad_norm"):
        return
    for backward, scaler in _scaled_backwards(m):
        for call in backward.func.calls:
            if call.order <= backward.order:
                continue
            if last_name(call.node.func) in ("clip_grad_norm_", "clip_grad_norm"):
                yield (
                    call.node,
                    (
                        f"gradients clipped after `{scaler}.scale(loss).backward()` without "
                        f"`{scaler}.unscale_(optimizer)`: the norm and the threshold apply to "
                        "gradients multiplied by the loss scale"
                    ),
                )
                break
