"""FSDP001: an optimizer built from a model's parameters before that model is sharded."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, is_inside, key_of, shard_kind
from fsdp_skill.lint.records import Call
from fsdp_skill.lint.rules._api import optimizer_calls

CODE = "FSDP001"
PITFALL = "optimizer-before-sharding"
SEVERITY = "error"
SUMMARY = "optimizer built from the parameters of a model that is sharded later"


def fix(version: tuple[int, int]) -> str:
    return (
        "shard first (fully_shard / FullyShardedDataParallel), then build the optimizer "
        "from the sharded model's parameters()"
    )


def _shard_events(m: FileModel) -> list[tuple[Call, str]]:
    """(call, key sharded) for direct sharding calls and local helpers that shard an argument."""
    events = []
    candidates = m.calls_to("fully_shard", "FullyShardedDataParallel", module="torch.distributed")
    candidates += [c for c, _ in m.local_calls]
    for call in sorted(candidates, key=lambda c: c.order):
        if shard_kind(m.call_name(call)) is not None:
            node = call.node
            arg = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg == "module"), None)
            )
            elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
            events += [(call, key_of(e)) for e in elts if key_of(e)]
            continue
        callee = m.local_callee(call)
        if callee is None:
            continue
        for param, arg in m.bound_args(call, callee):
            if m.shards_param(callee, param) or m.shards_inside_param(callee, param):
                if key_of(arg):
                    events.append((call, key_of(arg)))
    return events


def _optimizer_sites(m: FileModel) -> Iterator[tuple[Call, list[str]]]:
    """(call, model keys whose parameters it takes): direct optimizers and local factories."""
    factories: dict[int, set[str]] = {}
    for call in optimizer_calls(m):
        owners = m.parameter_owners(call_arg(call.node, 0, "params"), call.func)
        yield call, owners
        for owner in owners:
            if owner in call.func.params:
                factories.setdefault(id(call.func), set()).add(owner)
    for call, callee in m.local_calls:
        if id(callee) in factories:
            owners = [
                key_of(arg)
                for param, arg in m.bound_args(call, callee)
                if param in factories[id(callee)] and key_of(arg)
            ]
            if owners:
                yield call, owners


def _rebuilt_after(m: FileModel, opt: Call, after: int) -> bool:
    """True if the variable holding the optimizer is assigned again after ``after``."""
    for a in m.bound_to(opt.node):
        if any(b.order > after and b.func is opt.func for b in m.values_of(a.key, a.func)):
            return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard", "FullyShardedDataParallel"):
        return
    events = _shard_events(m)
    if not events:
        return
    for opt, owners in _optimizer_sites(m):
        for owner in owners:
            later = [
                (call, key)
                for call, key in events
                if call.func is opt.func
                and call.order > opt.order
                and any(is_inside(k, owner) for k in m.origins(key, call.func))
            ]
            if later and not _rebuilt_after(m, opt, later[0][0].order):
                line = later[0][0].line
                yield (
                    opt.node,
                    (
                        f"optimizer built from `{owner}` parameters before `{owner}` is sharded "
                        f"(line {line}): it would update the unsharded tensors"
                    ),
                )
                break
