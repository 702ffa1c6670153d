"""FSDP022: an FSDP1-only method or context manager used on an FSDP2 (fully_shard) module."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, key_of

CODE = "FSDP022"
PITFALL = "fsdp1-api-on-fsdp2-module"
SEVERITY = "error"
SUMMARY = "FSDP1-only API used on an FSDP2 module"

METHODS = {
    "no_sync": "set_requires_gradient_sync(False) on the micro-steps",
    "clip_grad_norm_": "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
    "summon_full_params": "model.unshard() / DTensor.full_tensor(), or get_model_state_dict",
}
STATIC = {
    "state_dict_type": "get_model_state_dict / set_model_state_dict with StateDictOptions",
    "summon_full_params": METHODS["summon_full_params"],
    "clip_grad_norm_": METHODS["clip_grad_norm_"],
}


def fix(version: tuple[int, int]) -> str:
    return (
        "FSDP2 replacements: no_sync() -> model.set_requires_gradient_sync(False); "
        "model.clip_grad_norm_ -> torch.nn.utils.clip_grad_norm_; summon_full_params -> "
        "unshard()/full_tensor(); FSDP.state_dict_type -> torch.distributed.checkpoint."
        "state_dict helpers"
    )


def _fsdp2(m: FileModel, expr: ast.expr | None, func) -> str | None:
    key = key_of(expr) if expr is not None else None
    if key is not None and m.shard_kinds(key, func) == {"fsdp2"}:
        return key
    return None


def _type_checked(m: FileModel, call, key: str) -> bool:
    """True if the call sits under ``if isinstance(key, ...)`` (code for several wrappers)."""
    func = call.func
    root = func.node if func.node is not None else m.tree
    for node in ast.walk(root):
        if isinstance(node, ast.If) and any(
            isinstance(t, ast.Call)
            and getattr(t.func, "id", "") == "isinstance"
            and t.args
            and key_of(t.args[0]) == key
            for t in ast.walk(node.test)
        ):
            if any(n is call.node for n in ast.walk(node)):
                return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard") or not m.sharded_keys("fsdp2"):
        return
    for call in m.calls:
        f = call.node.func
        if not isinstance(f, ast.Attribute):
            continue
        if call.name is None and f.attr in METHODS:
            key = _fsdp2(m, f.value, call.func)
            if key is not None and not _type_checked(m, call, key):
                yield (
                    call.node,
                    (
                        f"`{key}.{f.attr}` is FSDP1 API: an FSDP2 (fully_shard) module has no "
                        f"such method, this raises AttributeError (use {METHODS[f.attr]})"
                    ),
                )
        if call.name and f.attr in STATIC and "FullyShardedDataParallel" in call.name:
            key = _fsdp2(m, call_arg(call.node, 0, "module"), call.func)
            if key is not None:
                yield (
                    call.node,
                    (
                        f"FSDP.{f.attr}(`{key}`, ...) on an FSDP2 module: FSDP1 finds no FSDP1 "
                        f"unit in it and does nothing (use {STATIC[f.attr]})"
                    ),
                )
