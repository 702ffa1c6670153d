"""Which pages a web refresh starts from: the official list, moved onto a mirror or a version.

The official list (``topics.WEB_SEEDS``) names ``/docs/stable/`` pages. ``--base URL`` moves
every seed onto a mirror, path kept (``https://mirror.corp/pytorch/`` +
``docs/stable/fsdp.html``); ``--version X.Y`` replaces the version folder (``stable`` ->
``2.11``), so the crawl reads the version's pages directly instead of through the stubs.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from fsdp_skill.errors import UsageError
from fsdp_skill.references.redirects import VERSION_SEGMENT

STABLE = "stable"
_VERSION = re.compile(r"^(?:\d+\.\d+|stable|main)$")


def check_url(url: str, option: str) -> str:
    """``url`` when it is an absolute http(s) URL; a usage error otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{option} must be an http(s) URL, not {url!r}")
    return url


def check_version(version: str) -> str:
    """``version`` when it names a docs version (``2.11``, ``stable``, ``main``)."""
    if not _VERSION.match(version):
        raise UsageError(f"--version must look like 2.11 (or stable, main), not {version!r}")
    return version


def rebase(url: str, base: str) -> str:
    """``url`` moved onto the mirror at ``base``, its path kept."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return base.rstrip("/") + path


def with_version(url: str, version: str) -> str:
    """``url`` with its version folder (``stable``, ``2.10``) replaced by ``version``;
    URLs without one (the tutorials) are returned as they are."""
    parts = urlsplit(url)
    segments = parts.path.split("/")
    for index, segment in enumerate(segments[:-1]):
        if index and VERSION_SEGMENT.match(segment):
            segments[index] = version
            return parts._replace(path="/".join(segments)).geturl()
    return url


def installed_docs_version() -> str | None:
    """``X.Y`` of the installed torch (``2.13`` for ``2.13.0+cpu``), or None without torch."""
    from fsdp_skill.knowledge import installed_torch_version

    found = re.match(r"(\d+)\.(\d+)", installed_torch_version() or "")
    return f"{found.group(1)}.{found.group(2)}" if found else None


def versioned(urls: tuple[str, ...]) -> tuple[str, ...]:
    """The seeds among ``urls`` that lie in a version folder (the docs, not the tutorials)."""
    return tuple(u for u in urls if with_version(u, "0.0") != u)
