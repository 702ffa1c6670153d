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
    inits = m.calls_to("init_process_group", module="torch.distributed")
    if not inits:
        return
    project = m.project
    for call in inits:
        func = call.func
        if not project.runs_from_entry(m, func):
            continue  # a helper for code outside the project: its caller owns the teardown
        # a destroy counts only where it runs: in code that leads to this initialisation or
        # is called from there (a cleanup function nobody calls does not count)
        if any(
            project.reaches(am, af, "destroy", loose=True) for am, af in project.ancestors(m, func)
        ):
            return
        yield (
            call.node,
            (
                "init_process_group without destroy_process_group: the job can hang or warn "
                "at exit, and NCCL resources leak"
            ),
        )
        return
