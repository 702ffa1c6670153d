"""Redirect stubs: pages whose only job is to send the browser elsewhere.

The docs site serves every page under ``/docs/stable/`` as a stub pointing into the version
folder (``/docs/2.11/``): a ``<meta http-equiv="refresh">``, a ``location.replace(...)``
script and a canonical link, around a "Continue to ..." link. The crawler follows them like
HTTP redirects. A refresh header is a redirect wherever it appears; a script or a canonical
link only counts on a page with no content of its own, since every real page also names a
canonical URL (the docs pages name their ``stable/`` stub, which would be a loop).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

HEAD_BYTES = 64 * 1024
"""Stubs are tiny, and a refresh header sits in the head: only this much of a page is read."""
CONTENT_CHARS = 300
"""A page with more visible text than this is a page, not a stub."""
_CONTENT_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "pre", "table", "li", "article"}
_REFRESH_URL = re.compile(r"""^\s*\d*(?:\.\d*)?\s*[;,]?\s*(?:url\s*=\s*)?['"]?([^'"\s]+)""", re.I)
_SCRIPT_TARGET = re.compile(
    r"""location(?:\.href)?\s*(?:=|\.replace\s*\(|\.assign\s*\()\s*(['"])([^'"]+)\1"""
)
VERSION_SEGMENT = re.compile(r"^(?:stable|main|master|latest|nightly|\d+\.\d+(?:\.\d+)?)$")
"""Path segments that name a docs version (``stable``, ``2.11``)."""


class _StubReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refresh = ""
        self.canonical = ""
        self.scripts: list[str] = []
        self.text_chars = 0
        self.content_tags = 0
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        if tag == "meta" and values.get("http-equiv", "").lower() == "refresh":
            match = _REFRESH_URL.match(values.get("content", ""))
            if match and not match.group(1)[:1].isdigit():
                self.refresh = self.refresh or match.group(1)
        elif tag == "link" and "canonical" in values.get("rel", "").lower().split():
            self.canonical = self.canonical or values.get("href", "")
        if tag in _CONTENT_TAGS:
            self.content_tags += 1
        if tag in ("script", "style", "title"):
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "script":
            self.scripts.append(data)
        elif not self._in:
            self.text_chars += len(data.strip())


def target(html: str, url: str) -> str:
    """The absolute URL a stub page at ``url`` sends the browser to, or '' for a real page."""
    reader = _StubReader()
    reader.feed(html[:HEAD_BYTES])
    reader.close()
    if reader.refresh:
        return _absolute(reader.refresh, url)
    if len(html) > HEAD_BYTES or reader.content_tags or reader.text_chars > CONTENT_CHARS:
        return ""
    for script in reader.scripts:
        match = _SCRIPT_TARGET.search(script)
        if match:
            return _absolute(match.group(2), url)
    if reader.canonical:
        found = _absolute(reader.canonical, url)
        return "" if found == url else found
    return ""


def _absolute(href: str, base: str) -> str:
    found = urljoin(base, href.strip())
    return found if urlsplit(found).scheme in ("http", "https") else ""


def docs_root(url: str) -> str:
    """The part of ``url`` above its version folder (``https://host/docs/``), or its host and
    first folder when no segment names a version. Redirects may move within it."""
    parts = urlsplit(url)
    segments = parts.path.split("/")[1:-1]
    for index, segment in enumerate(segments):
        if VERSION_SEGMENT.match(segment):
            return f"{parts.scheme}://{parts.netloc}/" + "".join(s + "/" for s in segments[:index])
    first = f"{segments[0]}/" if segments else ""
    return f"{parts.scheme}://{parts.netloc}/{first}"


def folder(url: str) -> str:
    """The folder ``url`` lies in, with its trailing slash."""
    return url.rsplit("/", 1)[0] + "/"
