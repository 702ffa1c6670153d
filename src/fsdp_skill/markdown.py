"""Small, dependency-free readers for the Markdown the skill is made of.

Fenced code blocks, relative links and headings are what `verify`, the knowledge tests and
the search index need; a full Markdown parser would cost start-up time for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its language, the words after it, its text and first line (1-based)."""

    language: str
    tags: tuple[str, ...]
    code: str
    line: int
    attrs: dict[str, str] = field(default_factory=dict, compare=False)


def code_blocks(text: str) -> Iterator[CodeBlock]:
    """Yield the fenced code blocks of a Markdown text, in order."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match["fence"]
        words = match["info"].strip().split()
        language = words[0].lower() if words else ""
        tags = tuple(words[1:])
        attrs = dict(tag.split("=", 1) for tag in tags if "=" in tag)
        body: list[str] = []
        start = i + 1
        i += 1
        while i < len(lines):
            closing = lines[i].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            body.append(lines[i])
            i += 1
        yield CodeBlock(language, tags, "\n".join(body) + "\n", start + 1, attrs)
        i += 1


def strip_code(text: str) -> str:
    """The text with fenced code blocks blanked out (line numbers kept)."""
    out: list[str] = []
    in_fence = ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if in_fence:
            if line.strip().startswith(in_fence) and not line.strip().strip(in_fence[0]):
                in_fence = ""
            out.append("")
        elif match:
            in_fence = match["fence"]
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def links(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line, target)`` for each Markdown link outside code blocks."""
    for number, line in enumerate(strip_code(text).split("\n"), start=1):
        for match in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield number, match["target"]


def headings(text: str) -> Iterator[tuple[int, int, str]]:
    """Yield ``(line, level, title)`` for each ATX heading outside code blocks."""
    for number, line in enumerate(strip_code(text).split("\n"), start=1):
        match = _HEADING.match(line)
        if match:
            yield number, len(match["hashes"]), match["title"]


def slugify(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", ""))
    return slug.replace(" ", "-")


def split_front_matter(text: str, delimiter: str = "---") -> tuple[str, str, int]:
    """Split ``text`` into (front matter, body, line where the body starts).

    Returns an empty front matter when the text does not open with ``delimiter``.
    """
    if not text.startswith(delimiter + "\n") and text.strip() != delimiter:
        return "", text, 1
    end = text.find("\n" + delimiter, len(delimiter))
    if end == -1:
        raise ValueError(f"front matter opened with {delimiter!r} is never closed")
    after = text.find("\n", end + 1)
    body = "" if after == -1 else text[after + 1 :]
    front = text[len(delimiter) + 1 : end + 1]
    return front, body, front.count("\n") + 3
