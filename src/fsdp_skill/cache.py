"""Where the project keeps what it can rebuild: the search index, the crawler's pages, the
signature table ``explain`` matches with."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

STALE_AFTER_S = 7 * 24 * 3600
"""Cached files nobody has read for a week (older contents, other installs) are removed."""


def cache_dir() -> Path:
    """``$FSDP_SKILL_CACHE``, else ``fsdp-skill`` in the user's cache folder."""
    explicit = os.environ.get("FSDP_SKILL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fsdp-skill"


def prune(keep: Path, pattern: str) -> None:
    """Remove the files beside ``keep`` named like ``pattern`` that nobody has read for
    ``STALE_AFTER_S``: each new content writes a new file, and another install sharing the
    cache folder may still read its own."""
    now = time.time()
    for old in keep.parent.glob(pattern):
        if old != keep:
            with contextlib.suppress(OSError):
                if now - old.stat().st_atime > STALE_AFTER_S:
                    old.unlink()
