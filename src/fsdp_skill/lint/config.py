"""``[tool.fsdp-skill.lint]`` in the nearest ``pyproject.toml``: select, ignore, exclude."""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from fsdp_skill.errors import UsageError
from fsdp_skill.roots import Roots

_KEYS = {"select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "torch-version"}


@dataclass(frozen=True)
class LintConfig:
    root: Path | None = None
    """The folder of the pyproject.toml that configured this (exclude globs are relative)."""
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default_factory=tuple)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(glob relative to ``root``, codes) pairs."""
    torch_version: str | None = None

    def ignores_for(self, path: Path) -> list[str]:
        """The configured ignores plus the per-file ignores whose glob matches ``path``."""
        codes = list(self.ignore)
        if self.per_file_ignores and self.root is not None:
            try:
                rel = path.resolve().relative_to(self.root.resolve()).as_posix()
            except (ValueError, OSError):
                rel = path.as_posix()
            for pattern, extra in self.per_file_ignores:
                if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
                    codes += extra
        return codes


def _strings(value: object, key: str, path: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(f"{path}: [tool.fsdp-skill.lint] {key} must be a list of strings")


@lru_cache(maxsize=256)
def for_folder(folder: Path, roots: Roots | None = None) -> LintConfig:
    """The configuration that applies to files in ``folder`` (nearest pyproject.toml up).

    With ``roots``, only ``pyproject.toml`` files inside them are looked at or read.
    """
    for candidate in (folder, *folder.parents):
        if roots is not None and not roots.contains(candidate):
            break  # above the roots: nothing further up may be read
        path = candidate / "pyproject.toml"
        if roots is not None and not roots.contains(path):
            continue  # a link that leads out of the roots
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
        per_file_ignores=_per_file(section.get("per-file-ignores", {}), path),
        torch_version=version,
    )


def _per_file(value: object, path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise UsageError(f"{path}: [tool.fsdp-skill.lint] per-file-ignores must be a table")
    return tuple(
        (pattern, _strings(codes, f"per-file-ignores.{pattern}", path))
        for pattern, codes in value.items()
    )
