"""The environment-variable knowledge (``knowledge/env_vars.toml``) as the doctor uses it."""

from __future__ import annotations

import re

_SINCE = re.compile(r"^\s*(\d+\.\d+)\b")
_BEFORE = re.compile(r"^\s*(\d+\.\d+)\b.*?\(before:\s*([A-Z][A-Z0-9_]+)")


def known() -> dict[str, object]:
    """The described variables by name; empty if the knowledge file is absent or broken."""
    try:
        from fsdp_skill.knowledge import KnowledgeError, env_vars
    except ImportError:  # pragma: no cover - the knowledge package ships with this one
        return {}
    try:
        return {v.name: v for v in env_vars()}
    except (KnowledgeError, TypeError, OSError):
        return {}


def renamed() -> dict[str, tuple[str, str]]:
    """``{old name: (new name, torch version of the rename)}``, from each entry's ``since``
    (written as ``"2.2 (before: OLD_NAME...)"``)."""
    found = {}
    for name, entry in known().items():
        match = _BEFORE.match(getattr(entry, "since", "") or "")
        if match:
            found[match.group(2)] = (name, match.group(1))
    return found


def since(entry: object) -> str | None:
    """The torch release that first reads the variable, when the knowledge states one
    plainly (``"2.5 (...)"``); None for ``any``, ``<=2.4`` and other hedged forms."""
    match = _SINCE.match(getattr(entry, "since", "") or "") if entry is not None else None
    return match.group(1) if match else None
