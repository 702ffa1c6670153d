"""FSDP014: a process group initialised and never destroyed."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel

CODE = "FSDP014"
PITFALL = "process-group-never-destroyed"
SEVERITY = "warning"
SUMMARY = "process group never destroyed"


def fix(version: tuple[int, int]) -> str:
    return (
        "call dist.destroy_process_group() when training ends (in a finally: block so it "
        "also runs after an error)"
    )


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if "destroy_process_group" in m.identifiers:
        return
    for call in m.calls_to("init_process_group", module="torch.distributed"):
        func = call.func
        if not func.is_module and not m.is_referenced(func):
            continue  # a helper for other modules: its caller owns the teardown
        yield (
            call.node,
            (
                "init_process_group without destroy_process_group: the job can hang or warn "
                "at exit, and NCCL resources leak"
            ),
        )
        return
