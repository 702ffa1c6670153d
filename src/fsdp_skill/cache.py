"""Where the project keeps what it can rebuild: the search index, the crawler's pages, the
signature table ``explain`` matches with."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$FSDP_SKILL_CACHE``, else ``fsdp-skill`` in the user's cache folder."""
    explicit = os.environ.get("FSDP_SKILL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fsdp-skill"
