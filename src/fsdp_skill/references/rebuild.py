"""Rebuild a bundle's generated reference pages and its search index, all or nothing.

The new ``references/`` folder is assembled beside the old one (pages nobody regenerates are
copied over unchanged), indexed, compared section by section with the old one, and only then
swapped in with one atomic rename. Any failure before the swap leaves the bundle untouched.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.errors import UsageError
from fsdp_skill.search import index, sections
from fsdp_skill.textfile import Unreadable, read_text

_STAMP = re.compile(r"^\*(\w+) · torch [^ ]+ · \[official docs\]\([^)]*\)\*$", re.MULTILINE)
_FETCHED = re.compile(r"^(Source: <[^>]+>) · fetched [\d-]+$", re.MULTILINE)


def _fingerprint(section: sections.Section) -> str:
    """A hash of what a section says, ignoring the stamps that change without the content:
    the torch version of each API entry, the fetch date of a crawled page."""
    text = _STAMP.sub(r"*\1*", section.text)
    text = _FETCHED.sub(r"\1", text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def diff_sections(old: list[sections.Section], new: list[sections.Section]) -> dict[str, list[str]]:
    """Ids added, removed and changed between two lists of sections, each list sorted."""
    before = {s.id: _fingerprint(s) for s in old}
    after = {s.id: _fingerprint(s) for s in new}
    return {
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "changed": sorted(i for i in after.keys() & before.keys() if before[i] != after[i]),
    }


def _safe_name(name: str) -> str:
    """Refuse page names that could land outside the references folder."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*\.md", name) or ".." in name:
        raise ValueError(f"refusing to write a page named {name!r}")
    return name


def replace_pages(
    bundle: Path, pages: dict[str, str], owned: Callable[[str, str], bool]
) -> tuple[list[sections.Section], list[sections.Section]]:
    """Swap in ``references/`` with ``pages`` written and the pages ``owned`` no longer wants
    removed; everything else there (pages, other files, folders, links, FIFOs) is kept as it
    is. Returns (old sections, new sections).
    """
    link = bundle / "references"
    references = link.resolve() if link.is_symlink() else link  # a linked folder stays linked
    old = sections.bundle_sections(bundle)
    with atomic.staging_dir(references.parent, "references") as stage:
        new_refs = stage / "references"
        new_refs.mkdir()
        if references.is_dir():
            for path in sorted(references.iterdir()):
                if path.name not in pages and not _generated(path, owned):
                    _keep(path, new_refs / path.name)
            shutil.copystat(references, new_refs)
        for name, text in sorted(pages.items()):
            target = new_refs / _safe_name(name)
            if target.resolve().parent != new_refs.resolve():
                raise ValueError(f"refusing to write {name!r} outside the references folder")
            atomic.write_text(target, text)
        try:
            index.build(stage)  # the index of the new pages is ready before anyone can see them
        except OSError:
            pass  # the cache cannot hold it (full, read-only): search builds it when asked
        new = sections.bundle_sections(stage)
        if references.exists():
            atomic.replace_dir(new_refs, references)
        else:
            new_refs.rename(references)
    return old, new


def _generated(path: Path, owned: Callable[[str, str], bool]) -> bool:
    """True for a page this source wrote (and may rewrite or remove)."""
    if path.suffix != ".md" or path.is_symlink():
        return False
    try:
        text = read_text(path)
    except Unreadable:
        return False  # not a page we write: kept as it is
    return owned(path.name, text)


def _keep(path: Path, dest: Path) -> None:
    if not atomic.copy_entry(path, dest):
        raise UsageError(
            f"{path} is a socket or a device, which refresh cannot carry over; move it out "
            "of references/ and refresh again"
        )


def check_bundle(bundle: Path) -> Path:
    bundle = Path(bundle)
    if not bundle.is_dir():
        raise UsageError(f"{bundle} is not a folder (give the skill bundle to refresh)")
    if not (bundle / "SKILL.md").is_file() and not (bundle / "references").is_dir():
        raise UsageError(f"{bundle} is not a skill bundle: no SKILL.md or references/")
    return bundle
