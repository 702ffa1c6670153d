"""Which files of a bundle are indexed: the Markdown pages directly inside ``references/``.

Kept apart from the section parser so that a search, which only needs to know whether the
pages changed, does not load the parser. A ``*.md`` entry that is not a readable UTF-8 page
(a folder, a link to nothing, a FIFO, another encoding) is skipped with a warning on stderr,
once per process; it is never opened in a way that could block.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fsdp_skill.textfile import Unreadable, decode, read_text

_WARNED: set[tuple[str, str]] = set()


def reference_pages(bundle: Path) -> list[Path]:
    """The Markdown pages of ``bundle/references`` that are indexed, in a stable order."""
    return [Path(entry.path) for entry in page_entries(bundle)]


def page_entries(bundle: Path) -> list[os.DirEntry]:
    """Directory entries of the indexed pages, sorted by name (cheap to stat: no Path objects).

    Entries named ``*.md`` that are not regular files are left out, with a warning.
    """
    try:
        with os.scandir(Path(bundle) / "references") as found:
            named = [e for e in found if e.name.endswith(".md")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries = []
    for entry in named:
        try:
            regular = entry.is_file()
        except OSError:
            regular = False
        if regular:
            entries.append(entry)
        else:
            warn(f"references/{entry.name}", _why_not_a_page(entry))
    return sorted(entries, key=lambda e: e.name)


def _why_not_a_page(entry: os.DirEntry) -> str:
    if entry.is_symlink() and not os.path.exists(entry.path):
        return f"a symbolic link to {os.readlink(entry.path)}, which does not exist"
    if entry.is_dir():
        return "a folder, not a file"
    return "not a regular file (a FIFO, socket or device)"


def read_page(path: Path) -> str | None:
    """The text of one page, or None (after a warning) when it is not readable UTF-8."""
    try:
        return read_text(path)
    except Unreadable as exc:
        warn(f"references/{Path(path).name}", str(exc))
        return None


def check_text(path: Path, data: bytes) -> None:
    """Warn about a page whose bytes (already read) are not UTF-8."""
    try:
        decode(data)
    except Unreadable as exc:
        warn(f"references/{Path(path).name}", str(exc))


def warn(rel: str, why: str) -> None:
    """One line on stderr, the first time this page is skipped for this reason."""
    if (rel, why) in _WARNED:
        return
    _WARNED.add((rel, why))
    sys.stderr.write(f"fsdp-skill: warning: skipping {rel}: {why}\n")
