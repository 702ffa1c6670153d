"""FSDP004: process-group or device-mesh initialisation called off the main thread."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, key_of, last_name
from fsdp_skill.lint.records import Call, Func

CODE = "FSDP004"
PITFALL = "process-group-init-off-main-thread"
SEVERITY = "error"
SUMMARY = "process group initialised off the main thread"

_THREADING = ("Thread", "Timer", "ThreadPoolExecutor", "ThreadPool", "to_thread", "run_in_executor")
INIT_CALLS = ("init_process_group", "new_group", "new_subgroups", "init_device_mesh")


def fix(version: tuple[int, int]) -> str:
    return (
        "initialise process groups and device meshes on the main thread, once per process, "
        "before starting threads; hand the group or mesh to the threads"
    )


def _initialising(m: FileModel) -> set[int]:
    direct = {id(c.func) for c in m.calls_to(*INIT_CALLS, module="torch.distributed")}
    return m.transitive(direct)


def _executors(m: FileModel) -> set[str]:
    """Keys bound to thread pools (``ThreadPoolExecutor(...)``, ``ThreadPool(...)``)."""
    out = set()
    for key, records in m.assigns.items():
        for a in records:
            if isinstance(a.value, ast.Call):
                name = m.qualname(a.value.func) or ""
                if name.endswith(("ThreadPoolExecutor", "pool.ThreadPool")):
                    out.add(key)
    return out


def _thread_targets(m: FileModel) -> Iterator[tuple[Call, ast.expr | None]]:
    executors = _executors(m)
    for call in m.calls:
        name = m.call_name(call) or ""
        node = call.node
        if name == "threading.Thread":
            yield call, call_arg(node, 1, "target")
        elif name == "threading.Timer":
            yield call, call_arg(node, 1, "function")
        elif name == "asyncio.to_thread":
            yield call, call_arg(node, 0, "func")
        elif isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            receiver = key_of(node.func.value)
            if attr in ("submit", "map", "apply_async", "apply") and receiver in executors:
                yield call, call_arg(node, 0, "fn")
            elif attr == "run_in_executor":
                yield call, call_arg(node, 1, "func")


def _thread_subclass_runs(m: FileModel) -> Iterator[Func]:
    for cls in m.classes.values():
        if any((m.qualname(b) or "") == "threading.Thread" for b in cls.bases):
            run = cls.methods.get("run")
            if run is not None:
                yield run


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses(*INIT_CALLS) or not m.uses(*_THREADING):
        return
    initialising = _initialising(m)
    if not initialising:
        return
    for call, target in _thread_targets(m):
        func = m.function_ref(target, call.func) if target is not None else None
        if func is not None and id(func) in initialising:
            label = last_name(target) or "lambda"
            yield (
                call.node,
                (
                    f"`{label}` initialises a process group or device mesh and runs on another "
                    "thread: initialisation is not thread-safe and can race or hang"
                ),
            )
    for run in _thread_subclass_runs(m):
        if id(run) in initialising:
            yield (
                run.node,
                (
                    f"`{run.cls.name}.run` initialises a process group on a worker thread: "
                    "initialisation is not thread-safe and can race or hang"
                ),
            )
