"""FSDP017: plain torch.save of an FSDP model's or optimizer's state dict."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, key_of, last_name
from fsdp_skill.lint.records import Call
from fsdp_skill.lint.rules._api import last, optimizer_calls

CODE = "FSDP017"
PITFALL = "torch-save-sharded-state-dict"
SEVERITY = "error"
SUMMARY = "torch.save of a sharded model's or optimizer's state dict"


def fix(version: tuple[int, int]) -> str:
    if version < versions.DCP_SAVE:
        return (
            "FSDP1: gather inside FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, "
            "FullStateDictConfig(offload_to_cpu=True, rank0_only=True)) and torch.save on rank "
            "0, or save shards with torch.distributed.checkpoint.save_state_dict"
        )
    return (
        "save with torch.distributed.checkpoint (dcp.save(get_state_dict(...)) on every rank), "
        "or gather a full state dict with get_model_state_dict(..., StateDictOptions("
        "full_state_dict=True, cpu_offload=True)) and torch.save it on rank 0"
    )


def _optimizers_of_sharded(m: FileModel) -> set[str]:
    """Keys bound to optimizers built over a sharded model's parameters."""
    out = set()
    for call in optimizer_calls(m):
        params = call_arg(call.node, 0, "params")
        if any(m.shard_kinds(k, call.func) for k in m.parameter_owners(params, call.func)):
            out |= {a.key for a in m.bound_to(call.node)}
    return out


def _full_state_dict_context(m: FileModel, call: Call) -> bool:
    return any(last(m.qualname(w.func)) == "state_dict_type" for w in call.withs)


def _state_dicts(m: FileModel, expr: ast.expr | None, func, depth: int = 0) -> Iterator[Call]:
    """``X.state_dict()`` calls that ``expr`` holds: directly, in dict or list literals, as an
    argument of a wrapping call (``dict(...)``, ``copy.deepcopy(...)``), or through names."""
    if expr is None or depth > 3:
        return
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr == "state_dict" and id(expr) in m.call_of:
            yield m.call_of[id(expr)]
            return
        for arg in [*expr.args, *(k.value for k in expr.keywords)]:
            yield from _state_dicts(m, arg, func, depth + 1)
    elif isinstance(expr, ast.Name):
        for a in m.values_of(expr.id, func):
            if a.value is not None and not a.loop:
                yield from _state_dicts(m, a.value, a.func, depth + 1)
    elif isinstance(expr, ast.Dict):
        for value in expr.values:
            yield from _state_dicts(m, value, func, depth + 1)
    elif isinstance(expr, (ast.List, ast.Tuple)):
        for elt in expr.elts:
            yield from _state_dicts(m, elt, func, depth + 1)


def _names_a_rank(m: FileModel, expr: ast.expr | None, func, depth: int = 0) -> bool:
    """Whether a path expression varies with the rank (``f"model_rank_{rank}.pt"``,
    ``dist.get_rank()``, ``self.local_rank``), directly or through the names it reads."""
    if expr is None or depth > 3:
        return False
    for node in ast.walk(expr):
        if "rank" in (last_name(node) or "").lower():
            return True
        if isinstance(node, ast.Name) and any(
            _names_a_rank(m, a.value, a.func, depth + 1)
            for a in m.values_of(node.id, func)
            if a.value is not None
        ):
            return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard", "FullyShardedDataParallel"):
        return
    saves = [
        c
        for c in m.calls_to("save", module="torch")
        if m.call_name(c) in ("torch.save", "torch.serialization.save")
    ]
    if not saves or "set_state_dict_type" in m.identifiers or "state_dict" not in m.identifiers:
        return
    optimizers = _optimizers_of_sharded(m)
    for save in saves:
        obj = call_arg(save.node, 0, "obj")
        if obj is None:
            continue
        for sd in _state_dicts(m, obj, save.func):
            owner = key_of(sd.node.func.value)
            if owner is None or _full_state_dict_context(m, sd):
                continue
            # FSDP1's default state dict is a full one, so only FSDP2 (DTensor shards) is sure
            if m.shard_kinds(owner, sd.func) == {"fsdp2"}:
                files = (
                    "each rank writes a file of its own, tied to this world size"
                    if _names_a_rank(m, call_arg(save.node, 1, "f"), save.func)
                    else "every rank overwrites the same file"
                )
                yield (
                    save.node,
                    (
                        f"torch.save of `{owner}.state_dict()` of a sharded model: it holds "
                        f"this rank's shards only, and {files}"
                    ),
                )
                break
            if owner in optimizers:
                yield (
                    save.node,
                    (
                        f"torch.save of `{owner}.state_dict()` of an optimizer over sharded "
                        "parameters: it holds this rank's shards only"
                    ),
                )
                break
