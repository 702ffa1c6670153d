"""FSDP014: a process group initialised and never destroyed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.rules._api import spawn_calls, spawned_function

if TYPE_CHECKING:
    from fsdp_skill.lint.edits import Edit, Text

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


def edit(m: FileModel, node: ast.AST, text: Text) -> list[Edit] | None:
    """``<module>.destroy_process_group()`` appended where the program's distributed part ends,
    only where that place is unambiguous (in this file):

    - the initialisation is a plain statement of its function (not under an ``if``, a loop,
      a ``with`` or a ``try``: it runs exactly once, so the destroy can never meet a group
      that does not exist);
    - from there, each function is called from exactly one place, as a plain statement, up to
      the entry: the function that module-level code calls (``main()`` in the
      ``if __name__ == "__main__":`` block) or that ``mp.spawn`` starts;
    - the entry never returns early; the destroy goes after its last statement (for
      module-level code: after the last statement of the module, or of the ``__main__``
      block that initialises);
    - the module the initialisation is called through (``dist.``) names the destroy too."""
    from fsdp_skill.lint.edits import Edit

    call = m.call_of.get(id(node))
    name = _destroy_name(m, node) if call is not None else None
    if name is None or not _plain(m, call):
        return None
    if call.func.is_module:
        body = _module_body_of(m, call.node)
    else:
        body = _entry_body(m, call.func)
    if not body:
        return None
    end = text.line_end(body[-1].end_lineno)
    line = f"{text.newline()}{' ' * body[0].col_offset}{name}()"
    return [Edit(end, end, line, f"{name}() added where the program ends")]


def _plain(m: FileModel, call) -> bool:
    """True if the call is a plain statement of its function's (or the module's) body, or of
    the ``if __name__ == "__main__":`` block."""
    if call.branch is not None or call.loop or call.withs:
        return False
    return (
        _module_body_of(m, call.node) is not None
        if call.func.is_module
        else any(_contains(statement, call.node) for statement in call.func.node.body)
    )


def _module_body_of(m: FileModel, node: ast.AST) -> list[ast.stmt] | None:
    """The module body, or the ``__main__`` block's body, that holds ``node`` as (part of) a
    plain statement; None when it sits deeper."""
    for statement in m.tree.body:
        if _contains(statement, node):
            return m.tree.body
        if _is_main_guard(statement) and any(_contains(s, node) for s in statement.body):
            return statement.body
    return None


def _is_main_guard(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.If) or statement.orelse:
        return False
    test = statement.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _entry_body(m: FileModel, func) -> list[ast.stmt] | None:
    """The body at whose end the program's distributed part is over (see ``edit``), or None.

    Climbing from ``func`` through its single plain call sites: a function that module-level
    code calls after the chain ends there (``main``: its body); but when module-level code
    calls the initialising function itself (a ``setup()`` helper), the script goes on after
    it, so the body is the module's (or its ``__main__`` block's). A function started by
    ``mp.spawn`` ends its worker: its body."""
    start = func
    seen = set()
    while id(func) not in seen:
        seen.add(id(func))
        sites = [c for c, callee in m.local_calls if callee is func]
        if not sites:
            return _function_body(func) if _spawned(m, func) else None
        if len(sites) != 1 or not _plain(m, sites[0]):
            return None
        site = sites[0]
        if site.func.is_module and func is not start:
            return _function_body(func)  # main(): its decorators may wrap it, not skip parts
        if _decorated(m, func):
            return None  # a decorator may skip the call that creates the group
        if site.func.is_module:
            return _module_body_of(m, site.node)
        func = site.func
    return None


_TRANSPARENT = ("torch.distributed.elastic.multiprocessing.errors.record",)
"""Decorators that always run the function they wrap (``record`` only logs its errors)."""


def _decorated(m: FileModel, func) -> bool:
    """True if ``func`` has a decorator that might not run it (``@require_suite``-style skips):
    a destroy after it could then meet a group that was never created."""
    for decorator in func.node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (m.qualname(target) or "") not in _TRANSPARENT:
            return True
    return False


def _function_body(func) -> list[ast.stmt] | None:
    """The body to append to: None for a one-liner or a body that may return early."""
    node = func.node
    if _returns_early(node) or node.body[0].lineno == node.lineno:
        return None
    return node.body


def _spawned(m: FileModel, func) -> bool:
    """True if ``func`` is the worker a spawn call starts (see ``_api.spawn_calls``)."""
    return any(spawned_function(m, call) is func for call in spawn_calls(m))


def _contains(statement: ast.stmt, node: ast.AST) -> bool:
    """True if ``node`` is inside the simple statement ``statement``."""
    if isinstance(statement, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.AsyncWith)):
        return False
    return any(child is node for child in ast.walk(statement))


def _returns_early(func: ast.AST) -> bool:
    """True if the function body holds a ``return`` or ``yield`` of its own."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _destroy_name(m: FileModel, node: ast.Call) -> str | None:
    """``dist.destroy_process_group`` for ``dist.init_process_group(...)``; for a bare
    ``init_process_group(...)`` the destroy name must be imported already."""
    func = node.func
    if isinstance(func, ast.Attribute) and m.qualname(func.value) == "torch.distributed":
        return f"{ast.unparse(func.value)}.destroy_process_group"
    for alias, target in m.aliases.items():
        if target == "torch.distributed.destroy_process_group":
            return alias
    return None
