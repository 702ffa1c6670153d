"""FSDP003: a collective or state-dict gathering call reachable only on some ranks (hang)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.records import Branch, Call
from fsdp_skill.lint.rules._api import is_collective, on_subset

CODE = "FSDP003"
PITFALL = "collective-under-rank-condition"
SEVERITY = "error"
SUMMARY = "collective called on some ranks only"


def fix(version: tuple[int, int]) -> str:
    return (
        "call the collective on every rank (move it out of the rank check); keep only the "
        "rank-0 work, such as writing the file, inside the branch"
    )


def _collective_functions(m: FileModel) -> set[int]:
    direct = {id(c.func) for c in m.calls if is_collective(m, c) and not c.func.is_module}
    return m.transitive(direct)


def _collective_of(m: FileModel, call: Call, functions: set[int]) -> str | None:
    op = is_collective(m, call)
    if op:
        return None if on_subset(call) else op
    callee = m.local_callee(call)
    if callee is not None:
        return f"{callee.name}() (it runs a collective)" if id(callee) in functions else None
    for owner, func in m.project.callees(m, call):
        if owner is not m and m.project.reaches(owner, func, "collective"):
            return f"{func.name}() (it runs a collective, in {owner.name or 'another module'})"
    return None


def _mesh_local(m: FileModel, test: ast.expr) -> bool:
    """True if the test selects ranks by their place in a device mesh (``mesh.get_local_rank
    ("dp") == 0``): the branch then usually holds one sub-mesh's members, which run their own
    collectives on that sub-mesh. Not certain either way: stay silent."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get_local_rank", "get_coordinate") and m.call_name(node) is None:
                return True
    return False


def _paired_ops(by_branch: dict[Branch, list[tuple[Call, str]]]) -> set[tuple[int, str]]:
    """(function, op) pairs that run under two different rank checks of one function: the
    "rank 0 first" idiom (``if rank != 0: barrier()`` ... ``if rank == 0: barrier()``), in
    which every rank reaches the collective once. Stay silent on those."""
    seen: dict[tuple[int, str], set[int]] = {}
    for branch, hits in by_branch.items():
        for call, op in hits:
            seen.setdefault((id(call.func), op), set()).add(id(branch.node))
    return {key for key, ifs in seen.items() if len(ifs) > 1}


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    guarded = [c for c in m.calls if c.branch is not None]
    if not guarded:
        return
    functions = _collective_functions(m) if any(m.local_callee(c) for c in guarded) else set()
    # calls into the project's other modules are followed too (``m.project.callees``)
    by_branch: dict[Branch, list[tuple[Call, str]]] = {}
    for call in guarded:
        op = _collective_of(m, call, functions)
        if op:
            by_branch.setdefault(call.branch, []).append((call, op))
    paired = _paired_ops(by_branch)
    for branch, hits in by_branch.items():
        other = Branch(branch.node, not branch.orelse)
        if other in by_branch:
            continue  # both arms communicate: a matched pair (e.g. broadcast_object_list)
        if branch.orelse and not branch.node.orelse and not branch.after_exit:
            continue
        if any((id(call.func), op) in paired for call, op in hits):
            continue
        if _mesh_local(m, branch.node.test):
            continue
        call, op = hits[0]
        test = ast.unparse(branch.node.test)
        test = test if len(test) <= 60 else test[:57] + "..."
        if branch.after_exit:
            where = f"after `if {test}: return`"
        else:
            where = f"in the {'else-branch of' if branch.orelse else 'branch'} `if {test}`"
        yield (
            call.node,
            (
                f"`{op}` runs only {where}: the other ranks never join this collective and "
                "the job hangs"
            ),
        )
