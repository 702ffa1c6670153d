"""FSDP019: the global rank used as the CUDA device index in code that can run on several nodes."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import FOLLOW_DEPTH, call_arg, constant, last_name
from fsdp_skill.lint.records import Call, Func

CODE = "FSDP019"
PITFALL = "global-rank-as-device-index"
SEVERITY = "error"
SUMMARY = "global rank used as the CUDA device index"

_SINGLE_HOST = ("localhost", "127.0.0.1")


def fix(version: tuple[int, int]) -> str:
    return (
        'index devices with the local rank: local_rank = int(os.environ["LOCAL_RANK"]); '
        "torch.cuda.set_device(local_rank) (the global rank exceeds the GPU count from the "
        "second node on)"
    )


def _global_rank(m: FileModel, expr: ast.AST | None, func: Func, depth: int = 0) -> bool:
    """True if ``expr`` is certainly the process's global rank (``dist.get_rank()`` on the
    default group, ``RANK`` from the environment), through simple assignments."""
    if expr is None or depth > FOLLOW_DEPTH:
        return False
    if isinstance(expr, ast.Call):
        name = m.call_name(expr) or ""
        if name.endswith("distributed.get_rank") and not expr.args and not expr.keywords:
            return True
        tail = last_name(expr.func)
        if tail == "int" and expr.args:
            return _global_rank(m, expr.args[0], func, depth + 1)
        if tail in ("get", "getenv") and expr.args:
            return constant(expr.args[0]) == "RANK"
        return False
    if isinstance(expr, ast.Subscript):
        return constant(expr.slice) == "RANK" and last_name(expr.value) == "environ"
    if isinstance(expr, (ast.Name, ast.Attribute)):
        bound = m.values_of(_key(expr), func) if _key(expr) else []
        if not bound or any(a.value is None or a.loop for a in bound):
            return False
        return all(_global_rank(m, a.value, a.func, depth + 1) for a in bound)
    return False


def _key(expr: ast.AST) -> str | None:
    from fsdp_skill.lint.nodes import key_of

    return key_of(expr)


def _single_host(m: FileModel) -> bool:
    """True if the file pins one machine (``MASTER_ADDR = "localhost"``, ``tcp://127.0.0.1``):
    there the global rank is the local rank."""
    return any(any(h in s.value for h in _SINGLE_HOST) for s in m.strings)


def _sinks(m: FileModel) -> Iterator[tuple[Call, ast.expr]]:
    """(call, the expression it uses as a CUDA device index)."""
    for call in m.calls:
        node = call.node
        name = m.call_name(call) or ""
        tail = last_name(node.func) or ""
        if tail in ("set_device",) and node.args:
            yield call, node.args[0]
        elif name.endswith("init_process_group") or tail == "FullyShardedDataParallel":
            arg = call_arg(node, -1, "device_id")
            if arg is not None:
                yield call, arg
        elif tail == "DistributedDataParallel" or name.endswith("DistributedDataParallel"):
            ids = call_arg(node, -1, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)) and len(ids.elts) == 1:
                yield call, ids.elts[0]
        elif tail == "cuda" and call.name is None and node.args:
            yield call, node.args[0]
        elif name == "torch.device" and len(node.args) == 2 and constant(node.args[0]) == "cuda":
            yield call, node.args[1]


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not (m.uses("get_rank") or any(s.value == "RANK" for s in m.strings)) or _single_host(m):
        return
    for call, index in _sinks(m):
        if _global_rank(m, index, call.func):
            yield (
                call.node,
                (
                    f"`{ast.unparse(index)[:40]}` is the global rank, used as a CUDA device "
                    "index: on the second node it names a GPU that does not exist"
                ),
            )
