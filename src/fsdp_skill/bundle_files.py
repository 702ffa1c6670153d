"""The shipped skill bundle: where it lives in the package and what installing writes."""

from __future__ import annotations

import sys
from pathlib import Path

from fsdp_skill import SKILL_NAME

BUNDLE_DIR = Path(__file__).parent / "bundle" / SKILL_NAME
"""The bundle shipped inside the package, in the Agent Skills layout."""

LAUNCHER = "scripts/fsdp"
MANIFEST = ".fsdp-skill-manifest.json"
"""Written by install into each bundle: what it wrote (see ``install.manifest``)."""
_PYTHON_LINE = 'FSDP_SKILL_PYTHON=""'
_IGNORED = {"__pycache__", ".DS_Store"}


def sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data`` (hashlib loads OpenSSL, so it is imported only when hashing)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def bundle_files(bundle: Path = BUNDLE_DIR, python: str | None = None) -> dict[str, bytes]:
    """Every file of the bundle as ``{relative posix path: content}``.

    The launcher ``scripts/fsdp`` is given the path of ``python`` (default: this interpreter),
    so the installed skill runs the toolkit with the Python that installed it.
    """
    files: dict[str, bytes] = {}
    for path in sorted(bundle.rglob("*")):
        if path.is_dir() or _IGNORED.intersection(path.relative_to(bundle).parts):
            continue
        files[path.relative_to(bundle).as_posix()] = path.read_bytes()
    if LAUNCHER in files:
        interpreter = python or sys.executable
        text = files[LAUNCHER].decode()
        files[LAUNCHER] = text.replace(
            _PYTHON_LINE, f"FSDP_SKILL_PYTHON={_shell_quote(interpreter)}", 1
        ).encode()
    return files


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def is_executable(relpath: str) -> bool:
    return relpath.startswith("scripts/")
