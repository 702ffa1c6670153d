"""Which files of a bundle are indexed: the Markdown pages directly inside ``references/``.

Kept apart from the section parser so that a search, which only needs to know whether the
pages changed, does not load the parser.
"""

from __future__ import annotations

import os
from pathlib import Path


def reference_pages(bundle: Path) -> list[Path]:
    """The Markdown pages of ``bundle/references`` that are indexed, in a stable order."""
    return [Path(entry.path) for entry in page_entries(bundle)]


def page_entries(bundle: Path) -> list[os.DirEntry]:
    """Directory entries of the indexed pages, sorted by name (cheap to stat: no Path objects)."""
    try:
        with os.scandir(Path(bundle) / "references") as found:
            entries = [e for e in found if e.name.endswith(".md") and e.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(entries, key=lambda e: e.name)
