"""The lint rules: one module per code, each with ``CODE``, ``PITFALL`` (the pitfall id that
documents it), ``SEVERITY``, ``SUMMARY``, ``fix(version)`` and ``check(model)``.

``check`` yields ``(node, message)`` pairs; the engine turns them into findings.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from fsdp_skill.lint.core import FileModel

CODES = tuple(f"FSDP{n:03d}" for n in range(1, 27))


@dataclass(frozen=True)
class Rule:
    code: str
    pitfall: str
    severity: str
    summary: str
    fix: Callable[[tuple[int, int]], str]
    check: Callable[[FileModel], Iterator[tuple[ast.AST, str]]]
    edit: Callable | None = None
    """For a mechanical, safe fix: ``edit(model, node, text)`` -> the ``edits.Edit`` list for
    the finding at ``node``, or None where the fix is not certain."""


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule, in code order."""
    rules = []
    for code in CODES:
        mod = importlib.import_module(f"fsdp_skill.lint.rules.{code.lower()}")
        rules.append(
            Rule(
                mod.CODE,
                mod.PITFALL,
                mod.SEVERITY,
                mod.SUMMARY,
                mod.fix,
                mod.check,
                getattr(mod, "edit", None),
            )
        )
    return tuple(rules)


def rule(code: str) -> Rule | None:
    return next((r for r in all_rules() if r.code == code), None)
