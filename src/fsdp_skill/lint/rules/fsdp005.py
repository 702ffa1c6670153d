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
    if call_arg(call.node, -1, "device_id") is not None:
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


def _cuda_mesh(m: FileModel) -> bool:
    """True if the file builds a CUDA device mesh, which picks the device from LOCAL_RANK
    itself when none was chosen (torch/distributed/device_mesh.py): not certain, stay silent."""
    for call in m.calls_to("init_device_mesh", module="torch.distributed"):
        kinds = _strings(m, call, call_arg(call.node, 0, "device_type"))
        if kinds is None or "cuda" in kinds:
            return True
    return False
