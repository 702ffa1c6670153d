"""Make an installed bundle's API references match the torch the user trains with.

The shipped bundle carries API pages generated from one torch version. When the installed
torch is another version, install regenerates them by introspecting it (seconds: torch is
imported); when the versions match, nothing is imported.
"""

from __future__ import annotations

import re

from fsdp_skill.knowledge import installed_torch_version

_STAMP = re.compile(r"from torch (\S+):")
_PREFIX = "references/api-"


def shipped_version(files: dict[str, bytes]) -> str | None:
    """The torch version the bundle's API pages were generated from, if it has any."""
    for rel, data in sorted(files.items()):
        if rel.startswith(_PREFIX):
            match = _STAMP.search(data[:300].decode("utf-8", "replace"))
            if match:
                return match.group(1)
    return None


def for_installed_torch(files: dict[str, bytes]) -> tuple[dict[str, bytes], str | None]:
    """``files`` with API pages rebuilt for the installed torch, and a note of what was done.

    Returns the files unchanged (and no note) when torch is not installed or the shipped
    pages already match its version.
    """
    installed = installed_torch_version()
    installed = installed.split("+")[0] if installed else None
    shipped = shipped_version(files)
    if installed is None or installed == shipped:
        return files, None
    from fsdp_skill.references import api

    try:
        version, pages = api.build_pages()
    except api.TorchMissing:
        return files, None
    kept = {
        rel: data
        for rel, data in files.items()
        if not (rel.startswith(_PREFIX) and api.is_generated(data.decode("utf-8", "replace")))
    }
    kept.update({f"references/{name}": text.encode("utf-8") for name, text in pages.items()})
    return kept, f"API references rebuilt for the installed torch {version} (shipped: {shipped})"
