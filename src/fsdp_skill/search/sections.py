"""Cut the bundle's reference pages into the sections that search returns and show prints.

Section ids are derived from file names and headings only, so they stay the same across
rebuilds:

- ``<page>`` (the text before the first ``##``) and ``<page>#<heading-slug>`` for guides and
  crawled pages, one section per ``##`` heading (its ``###`` subsections included);
- ``pitfall:<id>`` for each ``## <id>`` of ``pitfalls.md``;
- ``env:<NAME>`` for each row of the table in ``env-vars.md``;
- ``api:<dotted.name>`` for each ``## <dotted.name>`` of an ``api-*.md`` page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill import markdown
from fsdp_skill.search.pages import read_page, reference_pages

PITFALLS_PAGE = "pitfalls.md"
ENV_PAGE = "env-vars.md"
API_PREFIX = "api-"
_SKIPPED_HEADINGS = {"contents", "table of contents"}
_URL = re.compile(r"\((https?://[^)\s]+)\)|<(https?://[^>\s]+)>|(?<![(<])(https?://[^\s)>|]+)")
_TABLE_ROW = re.compile(r"^\|(.+)\|\s*$")
_COMMENT = re.compile(r"^<!--.*-->\s*$")
INDEX_KIND = "index"
"""Sections that only list other sections: ``show`` prints them, ``search`` never ranks them."""


@dataclass(frozen=True)
class Section:
    """One searchable unit: what show prints and what search ranks."""

    id: str
    title: str
    path: str
    """Path of its page, relative to the bundle (``references/fsdp2.md``)."""
    url: str
    """The official page the section rests on ('' when none is known)."""
    text: str
    """The section's whole Markdown, heading included."""
    page_title: str = ""
    headings: str = ""
    """Titles of the subsections inside it."""
    kind: str = "guide"
    label: str = ""
    """What the title column of the index holds when it differs from the title shown."""

    @property
    def is_intro(self) -> bool:
        """A page's opening text (``fsdp2``), as opposed to one of its sections."""
        return self.kind in ("guide", "web") and "#" not in self.id


def first_url(text: str) -> str:
    """The first absolute http(s) URL in a Markdown text, or ''."""
    match = _URL.search(text)
    if not match:
        return ""
    return next(g for g in match.groups() if g)


def _split_h2(body: str) -> tuple[str, list[tuple[str, str]]]:
    """(text before the first ``##``, [(heading title, section text)]) outside code fences."""
    lines = body.split("\n")
    starts = [(n - 1, title) for n, level, title in markdown.headings(body) if level == 2]
    if not starts:
        return body, []
    intro = "\n".join(lines[: starts[0][0]])
    parts = []
    for i, (start, title) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(lines)
        parts.append((title, "\n".join(lines[start:end]).strip() + "\n"))
    return intro, parts


def _page_title(text: str) -> str:
    for _, level, title in markdown.headings(text):
        if level == 1:
            return title.strip()
    return ""


def _clean(text: str) -> str:
    """Drop generator comments and surrounding blank lines."""
    kept = [line for line in text.split("\n") if not _COMMENT.match(line)]
    return "\n".join(kept).strip() + "\n"


def _sub_headings(text: str) -> str:
    return " ".join(title for _, level, title in markdown.headings(text) if level > 2)


def _unique(slug: str, seen: dict[str, int]) -> str:
    """GitHub's anchors for repeated headings: ``x``, ``x-1``, ``x-2``."""
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def guide_sections(stem: str, rel: str, text: str, kind: str = "guide") -> Iterator[Section]:
    """The intro and the ``##`` sections of a guide-like page."""
    title = _page_title(text) or stem
    intro, parts = _split_h2(text)
    page_url = first_url(intro)
    intro_text = _clean(intro)
    if intro_text.strip():
        yield Section(stem, title, rel, page_url, intro_text, title, "", kind)
    seen: dict[str, int] = {}
    for heading, body in parts:
        slug = _unique(markdown.slugify(heading), seen)
        if heading.strip().lower() in _SKIPPED_HEADINGS:
            continue
        url = first_url(body) or page_url
        yield Section(
            f"{stem}#{slug}", heading.strip(), rel, url, body, title, _sub_headings(body), kind
        )


def pitfall_sections(rel: str, text: str) -> Iterator[Section]:
    """One section per ``## <pitfall-id>``; its title is the bold line under the heading.

    The page's index table comes first as ``pitfalls``: shown on request, never ranked.
    """
    intro, parts = _split_h2(text)
    if _clean(intro).strip():
        title = _page_title(text) or "Pitfalls"
        yield Section("pitfalls", title, rel, "", _clean(intro), title, "", INDEX_KIND)
    for heading, body in parts:
        bold = re.search(r"^\*\*(.+?)\*\*", body, re.MULTILINE)
        title = bold.group(1) if bold else heading
        docs = re.search(r"^Docs:.*$", body, re.MULTILINE)
        url = first_url(docs.group(0)) if docs else first_url(body)
        yield Section(
            f"pitfall:{heading.strip()}", title, rel, url, body, "FSDP pitfalls", heading, "pitfall"
        )


def env_sections(rel: str, text: str) -> Iterator[Section]:
    """One section per table row whose first cell names a variable."""
    header: list[str] = []
    for line in text.split("\n"):
        match = _TABLE_ROW.match(line.strip())
        if not match:
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", match.group(1))]
        if all(set(c) <= set("-: ") for c in cells):
            continue
        if not header:
            header = cells
            continue
        name = cells[0].strip("` ")
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            continue
        fields = [
            f"- **{h}**: {c.replace(chr(92) + '|', '|')}"
            for h, c in zip(header[1:], cells[1:], strict=False)
            if c
        ]
        body = f"## {name}\n\n" + "\n".join(fields) + "\n"
        title = f"{name}: {cells[2] if len(cells) > 2 else ''}".strip(": ")
        yield Section(
            f"env:{name}",
            title,
            rel,
            first_url(line),
            body,
            "Environment variables",
            "",
            "env",
            label=name,  # the description is body text: it must not outweigh section titles
        )


def api_sections(rel: str, text: str) -> Iterator[Section]:
    """One section per documented symbol (``## torch.x.y``)."""
    page = _page_title(text)
    _, parts = _split_h2(text)
    for heading, body in parts:
        name = heading.strip().strip("`")
        yield Section(f"api:{name}", name, rel, first_url(body), body, page, "", "api")


def page_sections(path: Path, bundle: Path) -> list[Section]:
    """Every section of one reference page (none when it is not readable UTF-8)."""
    text = read_page(path)
    if text is None:
        return []
    rel = path.relative_to(bundle).as_posix()
    if path.name == PITFALLS_PAGE:
        return list(pitfall_sections(rel, text))
    if path.name == ENV_PAGE:
        return list(env_sections(rel, text))
    if path.name.startswith(API_PREFIX):
        return list(api_sections(rel, text))
    kind = "web" if path.name.startswith("web-") else "guide"
    return list(guide_sections(path.stem, rel, text, kind))


def bundle_sections(bundle: Path) -> list[Section]:
    """Every section of every reference page; later duplicates of an id are dropped."""
    seen: set[str] = set()
    out: list[Section] = []
    for page in reference_pages(bundle):
        for section in page_sections(page, bundle):
            if section.id not in seen:
                seen.add(section.id)
                out.append(section)
    return out
