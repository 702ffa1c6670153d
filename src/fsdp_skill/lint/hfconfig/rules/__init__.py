"""The config checks: one module per code, each with ``CODE``, ``PITFALL`` (the pitfall id
that documents it), ``SEVERITY``, ``SUMMARY``, ``fix(version)`` and ``check(context)``.

``check`` yields ``(line, col, message)``; ``lint.hfconfig`` turns them into findings.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from fsdp_skill.lint.hfconfig.codes import CONFIG_CODES
from fsdp_skill.lint.hfconfig.context import Context


@dataclass(frozen=True)
class ConfigRule:
    code: str
    pitfall: str
    severity: str
    summary: str
    fix: Callable[[tuple[int, int]], str]
    check: Callable[[Context], Iterator[tuple[int, int, str]]]


@cache
def config_rules() -> tuple[ConfigRule, ...]:
    """Every config rule, in code order."""
    rules = []
    for code in CONFIG_CODES:
        mod = importlib.import_module(f"fsdp_skill.lint.hfconfig.rules.{code.lower()}")
        rules.append(
            ConfigRule(mod.CODE, mod.PITFALL, mod.SEVERITY, mod.SUMMARY, mod.fix, mod.check)
        )
    return tuple(rules)


def config_rule(code: str) -> ConfigRule | None:
    return next((r for r in config_rules() if r.code == code), None)


def at(entry, message: str, on_value: bool = False) -> tuple[int, int, str]:
    """A hit at an entry's key (or its value)."""
    if on_value:
        return entry.value_line, entry.value_col, message
    return entry.line, entry.col, message


def did_you_mean(name: str, known, cutoff: float = 0.75) -> str:
    """`` (did you mean `x`?)`` for the closest known name, or ``""``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=cutoff)
    return f" (did you mean `{close[0]}`?)" if close else ""
