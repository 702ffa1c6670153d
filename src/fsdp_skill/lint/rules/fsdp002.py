"""FSDP002: FSDP2 root module sharded before its submodules (fully_shard goes bottom-up)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import arms, call_arg, exclusive, is_inside, key_of, shard_kind
from fsdp_skill.lint.records import Call

CODE = "FSDP002"
PITFALL = "fully-shard-root-before-children"
SEVERITY = "error"
SUMMARY = "FSDP2 root module sharded before its submodules"


def fix(version: tuple[int, int]) -> str:
    where = versions.fsdp2_module(version) or "torch.distributed._composable.fsdp (torch>=2.4)"
    return (
        f"call fully_shard (from {where}) on each submodule first (e.g. every transformer "
        "block), and on the root model last"
    )


def _events(m: FileModel) -> list[tuple[Call, str, bool]]:
    """(call, key, inside): a fully_shard of ``key`` itself, or (inside=True) of its parts."""
    out = []
    candidates = m.calls_to("fully_shard", module="torch.distributed") + [
        c for c, _ in m.local_calls
    ]
    for call in sorted(candidates, key=lambda c: c.order):
        if shard_kind(m.call_name(call)) == "fsdp2":
            arg = call_arg(call.node, 0, "module")
            elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
            out += [(call, key_of(e), False) for e in elts if key_of(e)]
            continue
        callee = m.local_callee(call)
        if callee is None:
            continue
        for param, arg in m.bound_args(call, callee):
            key = key_of(arg)
            if key and m.shards_inside_param(callee, param):
                out.append((call, key, True))
            elif key and m.shards_param(callee, param):
                out.append((call, key, False))
    return out


def _arms_of(m: FileModel, call: Call) -> dict:
    func = call.func
    key = ("arms", id(func))
    if key not in m.memo:
        m.memo[key] = arms(func.node if func.node is not None else m.tree)
    return m.memo[key]


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard"):
        return
    events = _events(m)
    for call, key, inside in events:
        if inside:
            continue
        for later, other, other_inside in events:
            if later.func is not call.func or later.order <= call.order:
                continue
            origins = m.origins(other, later.func)
            below = other_inside and is_inside(other, key)
            below = below or any(is_inside(o, key) and o != key for o in origins)
            if below and not exclusive(_arms_of(m, call), call.node, later.node):
                # (the if/else arms are looked at last: they cost a walk of the function)
                yield (
                    call.node,
                    (
                        f"fully_shard(`{key}`) runs before its submodule `{other}` is sharded "
                        f"(line {later.line}): shard submodules first, the root last"
                    ),
                )
                break
