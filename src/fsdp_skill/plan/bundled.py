"""Model configs shipped with the planner, by short name (``llama-3-8b``, ``mixtral-8x7b``…)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsdp_skill.plan.model import load_config_file

CONFIG_DIR = Path(__file__).parent / "configs"


def names() -> list[str]:
    """Short names of the bundled configs, sorted."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def path(name: str) -> Path | None:
    """The bundled config file called ``name`` (case-insensitive), or None.

    Only the listed names count: ``name`` is never joined into a path, so ``../x`` or an
    absolute path cannot name a file outside the bundled ones.
    """
    key = name.lower()
    return CONFIG_DIR / f"{key}.json" if key in names() else None


def load(name: str) -> dict[str, Any] | None:
    """The bundled config called ``name`` as a dict, or None when there is none."""
    found = path(name)
    return load_config_file(found) if found else None
