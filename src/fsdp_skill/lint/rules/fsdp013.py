"""FSDP013: torch.distributed.launch or a --local_rank argument (use torchrun and LOCAL_RANK)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import constant

CODE = "FSDP013"
PITFALL = "deprecated-distributed-launch"
SEVERITY = "warning"
SUMMARY = "torch.distributed.launch / --local_rank instead of torchrun"

_MODULE = "torch.distributed.launch"
_LAUNCH_CMD = re.compile(r"(?:^|\s)-m\s+torch\.distributed\.launch\b")


def fix(version: tuple[int, int]) -> str:
    return (
        'launch with torchrun and read int(os.environ["LOCAL_RANK"]) instead of a '
        "--local_rank argument"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    for node, name in m.imports:
        if name == "torch.distributed.launch" or name.startswith("torch.distributed.launch."):
            yield node, "imports torch.distributed.launch, which is deprecated: use torchrun"
    calls = m.method_calls("add_argument") if "add_argument" in m.identifiers else []
    if calls and _spawns_workers(m):
        calls = []  # its workers get their index from spawn: the flag is no launcher's protocol
    for call in calls:
        flags = [constant(a) for a in call.node.args]
        if any(f in ("--local_rank", "--local-rank") for f in flags):
            yield (
                call.node,
                (
                    "a --local_rank argument: torchrun does not pass it; read the LOCAL_RANK "
                    "environment variable"
                ),
            )
    if any("torch.distributed.launch" in node.value for node in m.strings):
        yield from _launch_commands(m)


def _spawns_workers(m: FileModel) -> bool:
    """True if the script starts its own worker processes (``torch.multiprocessing.spawn`` and
    ``start_processes`` pass each worker its index): no launcher hands it a ``--local_rank``.
    An unresolved ``mp.spawn(worker, nprocs=n)`` (``mp`` from a star import) counts too: the
    ``nprocs`` keyword is that function's."""
    if m.calls_to("spawn", "start_processes", module="torch.multiprocessing"):
        return True
    return any(
        call.name is None and any(kw.arg == "nprocs" for kw in call.node.keywords)
        for call in m.method_calls("spawn")
    )


def _launch_commands(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    """``-m torch.distributed.launch`` in a command string or an argument list."""
    message = "launches with torch.distributed.launch, which is deprecated: use torchrun"
    for node in m.strings:
        if _LAUNCH_CMD.search(node.value):
            yield node, message
    for node in ast.walk(m.tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [constant(e) for e in node.elts]
            for before, item in zip(items, items[1:], strict=False):
                if before == "-m" and item == _MODULE:
                    yield node, message
