"""FSDP024: a full checkpoint written into one place from every rank while only rank 0 holds
the full state."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import last_name
from fsdp_skill.lint.rules._api import kwarg_is

CODE = "FSDP024"
PITFALL = "save-from-every-rank"
SEVERITY = "error"
SUMMARY = "full checkpoint written from every rank"


def fix(version: tuple[int, int]) -> str:
    return (
        "write on rank 0 only: if dist.get_rank() == 0: model.save_pretrained(path, "
        "state_dict=state_dict) (or pass is_main_process=rank == 0)"
    )


def _rank0_full_state(m: FileModel) -> bool:
    """True if the file gathers a full state dict that only rank 0 receives."""
    for call in m.calls_to("FullStateDictConfig", module="torch.distributed"):
        if kwarg_is(call.node, "rank0_only", True):
            return True
    for call in m.calls_to("StateDictOptions", module="torch.distributed"):
        node = call.node
        if kwarg_is(node, "full_state_dict", True) and kwarg_is(node, "cpu_offload", True):
            return True  # full state on rank 0, empty dicts elsewhere
    return False


_GATHERS = {"get_model_state_dict", "get_state_dict", "state_dict"}


def _writes(m: FileModel):
    """(call, how) for writes of a gathered state dict: ``save_pretrained(dir,
    state_dict=sd)`` and ``torch.save(sd, path)``, where ``sd`` comes from a state-dict call."""
    for call in m.calls:
        f = call.node.func
        node = call.node
        if isinstance(f, ast.Attribute) and f.attr == "save_pretrained" and call.name is None:
            if any(kw.arg == "is_main_process" for kw in node.keywords):
                continue
            data = next((kw.value for kw in node.keywords if kw.arg == "state_dict"), None)
            how = "save_pretrained"
        elif m.call_name(call) == "torch.save":
            data = node.args[0] if node.args else None
            how = "torch.save"
        else:
            continue
        if data is not None and _gathered(m, data, call.func):
            yield call, how


def _gathered(m: FileModel, expr: ast.expr, func) -> bool:
    """True if ``expr`` is (bound to) the result of a gathering state-dict call."""
    for value in m.resolve(expr, func):
        if isinstance(value, ast.Call) and (last_name(value.func) or "") in _GATHERS:
            if last_name(value.func) != "state_dict" or _in_full_context(m, value):
                return True
    return False


def _in_full_context(m: FileModel, call: ast.Call) -> bool:
    """``model.state_dict()`` inside ``with FSDP.state_dict_type(..., FULL_STATE_DICT, cfg)``."""
    record = m.call_of.get(id(call))
    return record is not None and any(last_name(w.func) == "state_dict_type" for w in record.withs)


def _rank_guarded(m: FileModel, call) -> bool:
    """True if the write runs under a rank check, here or at every call site of its function."""
    if call.branch is not None:
        return True
    func = call.func
    if func.is_module:
        return False
    sites = [c for c in m.calls if m.local_callee(c) is func]
    return bool(sites) and all(c.branch is not None for c in sites)


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("FullStateDictConfig", "StateDictOptions") or not _rank0_full_state(m):
        return
    for call, how in _writes(m):
        if _rank_guarded(m, call):
            continue
        yield (
            call.node,
            (
                f"{how} runs on every rank, but only rank 0 holds the full state dict: the "
                "other ranks write empty or partial files over the same path"
            ),
        )
