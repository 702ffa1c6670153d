"""FSDP005: NCCL with no per-rank device (no set_device anywhere on the way to it)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant
from fsdp_skill.lint.records import Call

CODE = "FSDP005"
PITFALL = "nccl-without-per-rank-device"
SEVERITY = "error"
SUMMARY = "NCCL used with no per-rank CUDA device"

_DEVICE_SETTERS = {"set_device", "set_device_index", "set_device_idx"}


def fix(version: tuple[int, int]) -> str:
    advice = 'call torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) before initialising'
    if version >= versions.DEVICE_ID:
        advice += (
            "; passing device_id=torch.device('cuda', local_rank) as well binds the "
            "communicator eagerly, but it does not set the current device"
        )
    return advice


def _strings(m: FileModel, call: Call, expr: ast.expr | None) -> set[str] | None:
    """The literal strings ``expr`` may be (an ``a if c else b`` gives both); None if unknown."""
    if expr is None:
        return None
    out: set[str] = set()
    for value in m.resolve(expr, call.func):
        options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
        for option in options:
            text = constant(option)
            if not isinstance(text, str):
                return None
            out.add(text.lower())
    return out


def _device_pinned(m: FileModel, call: Call) -> bool:
    """True if this file, or code that runs around this initialisation, sets the device.

    ``init_process_group(device_id=...)`` does not count: in torch 2.13 it binds the group to
    that device (eager communicator init, barrier's device) but never calls set_device, so
    ``.cuda()`` and ``torch.cuda.current_device()`` still mean cuda:0 on every rank."""
    if m.identifiers & _DEVICE_SETTERS or m.calls_to("device", module="torch.cuda"):
        return True  # ``with torch.cuda.device(local_rank):`` selects the device too
    if any("CUDA_VISIBLE_DEVICES" == s.value for s in m.strings):
        return True
    project = m.project
    return any(
        project.reaches(am, af, "set_device", loose=True)
        for am, af in project.ancestors(m, call.func)
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    uses = []
    for call in m.calls_to("init_process_group", module="torch.distributed"):
        backends = _strings(m, call, call_arg(call.node, 0, "backend"))
        if backends and any("nccl" in b for b in backends):
            uses.append(call)
    if not uses or _cuda_mesh(m):
        return
    call = uses[0]
    if not m.project.runs_from_entry(m, call.func):
        return  # a helper for code outside the project: its callers choose the device
    if _device_pinned(m, call):
        return
    around = {id(am): am for am, _ in m.project.ancestors(m, call.func)} | {id(m): m}
    if any(_places_per_rank(am) for am in around.values()):
        default = next((d for am in around.values() for d in _default_device_uses(am)), None)
        if default is None:
            return  # every CUDA use in sight names its per-rank device: nothing lands on cuda:0
        message = (
            "init_process_group with NCCL but no per-rank device is set: the work placed on "
            f"per-rank devices is fine, but `{ast.unparse(default.node.func)}()` (line "
            f"{default.line}) and every other call without a device act on cuda:0 on every rank"
        )
    elif call_arg(call.node, -1, "device_id") is not None:
        message = (
            "init_process_group(device_id=...) binds the NCCL group to a device but does not "
            "set the current device: .cuda() and torch.cuda.current_device() still mean cuda:0 "
            "on every rank"
        )
    else:
        message = (
            "init_process_group with NCCL but no per-rank device is set: every rank would use "
            "cuda:0 (hangs or 'Duplicate GPU detected')"
        )
    yield call.node, message


_DEFAULT_DEVICE_CALLS = {
    "synchronize",
    "empty_cache",
    "reset_peak_memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "mem_get_info",
    "current_device",
}


def _per_rank(m: FileModel, expr: ast.expr | None, call: Call) -> bool:
    """True if ``expr`` is a device index that differs per process (not a constant)."""
    if expr is None:
        return False
    if isinstance(expr, ast.JoinedStr):  # f"cuda:{rank}"
        return any(isinstance(v, ast.FormattedValue) for v in expr.values)
    values = m.resolve(expr, call.func)
    return bool(values) and not all(isinstance(v, ast.Constant) for v in values)


def _places_per_rank(m: FileModel) -> bool:
    """True if the file puts its work on per-rank devices by name: ``DDP(device_ids=[i])``,
    FSDP1 ``device_id=i``, ``torch.device("cuda", i)``, ``torch.device(f"cuda:{i}")``,
    ``.to(rank)`` / ``.cuda(rank)`` (``i`` not a constant). The ``device_id`` of
    ``init_process_group`` does not count: it binds the group, it places no work."""
    group_devices = {
        id(call_arg(c.node, -1, "device_id"))
        for c in m.calls_to("init_process_group", module="torch.distributed")
    }
    for call in m.calls:
        if id(call.node) in group_devices:
            continue
        node = call.node
        name = call.name or ""
        tail = name.rsplit(".", 1)[-1] if name else ""
        if tail in ("DistributedDataParallel", "FullyShardedDataParallel"):
            ids = call_arg(node, -1, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)) and ids.elts:
                if _per_rank(m, ids.elts[0], call):
                    return True
            if _per_rank(m, call_arg(node, -1, "device_id"), call):
                return True
        elif name == "torch.device":
            index = node.args[1] if len(node.args) == 2 else (node.args[0] if node.args else None)
            if len(node.args) == 2 and constant(node.args[0]) != "cuda":
                continue
            if _per_rank(m, index, call):
                return True
        elif call.name is None and isinstance(node.func, ast.Attribute) and node.args:
            index = node.args[0]
            if node.func.attr in ("to", "cuda") and m.is_rank_expr(index, call.func):
                if _per_rank(m, index, call):
                    return True
    return False


def _default_device_uses(m: FileModel) -> Iterator[Call]:
    """Calls that act on the current CUDA device: ``torch.cuda.synchronize()`` and friends
    without a device, ``.cuda()`` without an index, ``dist.barrier()`` without device_ids."""
    for call in m.calls:
        node = call.node
        name = call.name or ""
        if node.args or any(kw.arg in ("device", "device_ids") for kw in node.keywords):
            continue
        if name.startswith("torch.cuda.") and name.rsplit(".", 1)[-1] in _DEFAULT_DEVICE_CALLS:
            yield call
        elif name == "torch.distributed.barrier":
            yield call
        elif (
            call.name is None and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda"
        ):
            yield call


def _cuda_mesh(m: FileModel) -> bool:
    """True if the file builds a CUDA device mesh, which picks the device from LOCAL_RANK
    itself when none was chosen (torch/distributed/device_mesh.py): not certain, stay silent."""
    for call in m.calls_to("init_device_mesh", module="torch.distributed"):
        kinds = _strings(m, call, call_arg(call.node, 0, "device_type"))
        if kinds is None or "cuda" in kinds:
            return True
    return False
