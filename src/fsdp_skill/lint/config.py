"""``[tool.fsdp-skill.lint]`` in the nearest ``pyproject.toml``: select, ignore, exclude."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from fsdp_skill.errors import UsageError

_KEYS = {"select", "ignore", "exclude", "extend-exclude", "torch-version"}


@dataclass(frozen=True)
class LintConfig:
    root: Path | None = None
    """The folder of the pyproject.toml that configured this (exclude globs are relative)."""
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default_factory=tuple)
    torch_version: str | None = None


def _strings(value: object, key: str, path: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(f"{path}: [tool.fsdp-skill.lint] {key} must be a list of strings")


@lru_cache(maxsize=256)
def for_folder(folder: Path) -> LintConfig:
    """The configuration that applies to files in ``folder`` (nearest pyproject.toml up)."""
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return _read(path)
    return LintConfig()


def _read(path: Path) -> LintConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    section = data.get("tool", {}).get("fsdp-skill", {}).get("lint", {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: [tool.fsdp-skill.lint] must be a table")
    unknown = set(section) - _KEYS
    if unknown:
        raise UsageError(
            f"{path}: unknown key(s) in [tool.fsdp-skill.lint]: {', '.join(sorted(unknown))}"
        )
    version = section.get("torch-version")
    if version is not None and not isinstance(version, str):
        raise UsageError(f"{path}: [tool.fsdp-skill.lint] torch-version must be a string")
    return LintConfig(
        root=path.parent,
        select=_strings(section["select"], "select", path) if "select" in section else None,
        ignore=_strings(section.get("ignore", []), "ignore", path),
        exclude=_strings(section.get("exclude", []), "exclude", path)
        + _strings(section.get("extend-exclude", []), "extend-exclude", path),
        torch_version=version,
    )
