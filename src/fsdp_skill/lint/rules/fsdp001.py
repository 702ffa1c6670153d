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


def _shard_events(m: FileModel, funcs: set[int]) -> list[tuple[Call, str]]:
    """(call, key sharded) for direct sharding calls and helpers (of this file or another
    module of the project) that shard an argument, in the functions ``funcs`` (ids)."""
    events = []
    candidates = m.calls_to("fully_shard", "FullyShardedDataParallel", module="torch.distributed")
    candidates += [c for c in m.calls if c.name is None or not c.name.startswith("torch.")]
    candidates = [c for c in candidates if id(c.func) in funcs and (c.node.args or c.node.keywords)]
    for call in sorted(set(candidates), key=lambda c: c.order):
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
        for owner, callee in m.project.callees(m, call):
            for param, arg in m.bound_args(call, callee):
                if owner.shards_param(callee, param) or owner.shards_inside_param(callee, param):
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
    yield from _returned_pairs(m)


def _returned_pairs(m: FileModel) -> Iterator[tuple[Call, list[str]]]:
    """``model, opt = build(cfg)`` where the helper (in this file or another module of the
    project) returns a tuple holding a module and an optimizer over its parameters: the
    optimizer site is the helper call, its owner the name the module is unpacked into."""
    unpacked: dict[int, dict[int, str]] = {}
    for records in m.assigns.values():
        for a in records:
            if a.unpacked is not None:
                unpacked.setdefault(id(a.unpacked[0]), {})[a.unpacked[1]] = a.key
    if not unpacked:
        return
    for call in m.calls:
        names = unpacked.get(id(call.node))
        if not names:
            continue
        for owner, callee in m.project.callees(m, call):
            for opt_index, model_index in _optimizer_pairs(owner, callee):
                if opt_index in names and model_index in names:
                    yield call, [names[model_index]]


def _optimizer_pairs(m: FileModel, func) -> list[tuple[int, int]]:
    """(i, j) for ``return (..., model, ..., optimizer, ...)`` where item i is an optimizer
    built from the parameters of item j."""
    pairs = []
    optimizers = {id(c.node): c for c in optimizer_calls(m) if c.func is func}
    for ret in func.returns:
        if not isinstance(ret, ast.Tuple):
            continue
        keys = [key_of(e) for e in ret.elts]
        for i, elt in enumerate(ret.elts):
            for value in m.resolve(elt, func):
                opt = optimizers.get(id(value))
                if opt is None:
                    continue
                owners = m.parameter_owners(call_arg(opt.node, 0, "params"), func)
                pairs += [(i, j) for j, k in enumerate(keys) if k is not None and k in owners]
    return pairs


def _rebuilt_after(m: FileModel, opt: Call, after: int) -> bool:
    """True if the variable holding the optimizer is assigned again after ``after``."""
    for a in m.bound_to(opt.node):
        if any(b.order > after and b.func is opt.func for b in m.values_of(a.key, a.func)):
            return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    sites = list(_optimizer_sites(m))
    if not sites:
        return
    # sharding calls, or helpers (maybe elsewhere) that shard, where an optimizer is built
    events = _shard_events(m, {id(opt.func) for opt, _ in sites})
    if not events:
        return
    for opt, owners in sites:
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
