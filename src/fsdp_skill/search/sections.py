"""Cut the bundle's reference pages into the sections that search returns and show prints.

Section ids are derived from file names and headings only, so they stay the same across
rebuilds:

- ``<page>`` (the text before the first ``##``) and ``<page>#<heading-slug>`` for guides and
  crawled pages, one section per ``##`` heading (its ``###`` subsections included);
- ``pitfall:<id>`` for each ``## <id>`` of ``pitfalls.md``;
- ``env:<NAME>`` for each row of the table in ``env-vars.md``;
- ``api:<dotted.name>`` for each ``## <dotted.name>`` of an ``api-*.md`` page.

A long section is also searched by its parts: ``<section id>/<sub-heading slug>`` for each of
its ``###`` (else ``####``) sub-headings, or, on pages without them (docstrings), for each
paragraph that is only a bold phrase. ``show`` prints a part alone and the section whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
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
_SEARCH_WORDS = re.compile(r"^<!-- search: ([^\n]{0,4000}?) -->[ \t]*\n(?:[ \t]*\n)?", re.MULTILINE)
"""The ``tags`` of a guide or pitfall, as ``render`` writes them: indexed, never shown."""
_BOLD_LINE = re.compile(r"^\*\*([^*\n]{2,80}?)\*\*:?\s*$")
_LINK_MARKUP = re.compile(r"!?\[[^\]]*\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
_HEADING_LINE = re.compile(r"^#{1,6}\s.*$", re.MULTILINE)
_SYMPTOM = re.compile(r"^\*\*Symptom\.\*\*(.*?)(?=^\*\*\w+\.\*\*|\Z)", re.DOTALL | re.MULTILINE)
_SEEN = re.compile(
    r"^\*\*What you see[^*\n]{0,80}\.\*\*(.*?)(?=\n\s*\n|\Z)", re.DOTALL | re.MULTILINE
)
"""A guide section's paragraph on what the user sees: searched like a pitfall's symptom."""
SPLIT_ABOVE = 2500
"""A section longer than this (characters) is searched by its parts: one section that
mentions every topic of a long page would otherwise win on term counts alone."""
MERGE_BELOW = 400
"""A part shorter than this joins the part after it (a sub-heading directly over another)."""
LEAN_WORDS = 8
"""A section with fewer words than this, besides its headings and links, has no content of its
own (a list of links, a bare heading): it never ranks above one that has."""
_DOCSTRING_FIELDS = {"args", "arguments", "parameters", "keyword arguments", "returns"}
_DOCSTRING_FIELDS |= {"return type", "yields", "raises", "attributes", "example", "examples"}
_DOCSTRING_FIELDS |= {"note", "notes", "warning", "warnings", "see also"}
"""Bold lines that are fields of a docstring, not topics: they stay with their entry."""
_BOLD_LEVEL = 7
"""The level ``_cuts`` gives bold-phrase paragraphs: below every heading, never split again."""
PART = "/"
"""Separates a section id from the slug of one of its parts."""
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
    own_text: str = ""
    """What the index reads when its parts are indexed apart: the text before the first part
    ('' when the index reads all of ``text``)."""
    symptom: str = ""
    """What a pitfall looks like to the user (its symptom and error text), weighed like a title."""

    @property
    def indexed_text(self) -> str:
        """The Markdown the index reads for this section."""
        return self.own_text or self.text

    @property
    def is_lean(self) -> bool:
        """Only headings and links: nothing of its own that answers a question."""
        text = _LINK_MARKUP.sub(" ", _HEADING_LINE.sub(" ", self.indexed_text))
        return len(re.findall(r"\w+", text)) < LEAN_WORDS

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


def _search_words(text: str) -> tuple[str, str]:
    """``text`` without its search-words comments, and the words they hold."""
    words = " ".join(m.group(1).replace(",", " ") for m in _SEARCH_WORDS.finditer(text))
    return _SEARCH_WORDS.sub("", text), " ".join(words.split())


def _sub_headings(text: str, level: int = 2) -> str:
    return " ".join(title for _, lvl, title in markdown.headings(text) if lvl > level)


def _unique(slug: str, seen: dict[str, int]) -> str:
    """GitHub's anchors for repeated headings: ``x``, ``x-1``, ``x-2``."""
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def guide_sections(stem: str, rel: str, text: str, kind: str = "guide") -> Iterator[Section]:
    """The intro and the ``##`` sections of a guide-like page."""
    title = _page_title(text) or stem
    intro, parts = _split_h2(text)
    intro, words = _search_words(intro)
    page = f"{title} {words}".strip()
    page_url = first_url(intro)
    intro_text = _clean(intro)
    if intro_text.strip():
        yield Section(
            stem, title, rel, page_url, intro_text, page, "", kind, symptom=_what_you_see(intro)
        )
    seen: dict[str, int] = {}
    for heading, body in parts:
        slug = _unique(markdown.slugify(heading), seen)
        if heading.strip().lower() in _SKIPPED_HEADINGS:
            continue
        url = first_url(body) or page_url
        yield Section(
            f"{stem}#{slug}",
            heading.strip(),
            rel,
            url,
            body,
            title,
            _sub_headings(body),
            kind,
            symptom=_what_you_see(body),
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
        body, words = _search_words(body)
        bold = re.search(r"^\*\*(.+?)\*\*", body, re.MULTILINE)
        title = bold.group(1) if bold else heading
        docs = re.search(r"^Docs:.*$", body, re.MULTILINE)
        url = first_url(docs.group(0)) if docs else first_url(body)
        yield Section(
            f"pitfall:{heading.strip()}",
            title,
            rel,
            url,
            body,
            "FSDP pitfalls",
            f"{heading} {words}".strip(),
            "pitfall",
            symptom=_symptom(body),
        )


def _symptom(body: str) -> str:
    """A pitfall's symptom paragraph and its kind (``hang``, ``crash``: the words after the
    bold title), markers dropped."""
    found = _SYMPTOM.search(body)
    first = body.split("\n\n", 2)[1] if body.count("\n\n") >= 2 else ""
    kinds = first.split("**")[-1] if first.startswith("**") else ""
    text = (found.group(1) if found else "") + " " + kinds.split(";")[0]
    return " ".join(text.replace("**", "").split())


def _what_you_see(text: str) -> str:
    """The text of a guide section's "What you see." paragraphs, markers dropped."""
    return " ".join(" ".join(m.group(1).replace("**", "").split()) for m in _SEEN.finditer(text))


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


def _cuts(lines: list[str], level: int) -> tuple[int, list[tuple[int, str]]]:
    """(level of the sub-headings found, [(line index, title)]) of the sub-headings deepest
    under ``level`` that the text has; bold-phrase paragraphs (``_BOLD_LEVEL``) when it has none."""
    text = "\n".join(lines)
    found = [(n - 1, lvl, title) for n, lvl, title in markdown.headings(text) if lvl > level]
    if found:
        top = min(lvl for _, lvl, _ in found)
        return top, [(n, title.strip()) for n, lvl, title in found if lvl == top]
    prose = markdown.strip_code(text).split("\n")
    bold = []
    for n, line in enumerate(prose):
        match = _BOLD_LINE.match(line)
        alone = (
            n > 0 and not prose[n - 1].strip() and (n + 1 == len(prose) or not prose[n + 1].strip())
        )
        if match and alone and match.group(1).strip().rstrip(":").lower() not in _DOCSTRING_FIELDS:
            bold.append((n, match.group(1).strip().rstrip(":")))
    return _BOLD_LEVEL, bold


def parts(section: Section, level: int = 2) -> list[Section]:
    """``section`` and, when it is long, its parts (recursively for long parts).

    The section keeps its id and whole text (``show`` prints it all) but the index reads only
    its text before the first part; each part is ``<id>/<slug>`` with its own text.
    """
    if len(section.text) <= SPLIT_ABOVE or section.kind not in ("guide", "web", "api"):
        return [section]
    lines = section.text.split("\n")
    found, cuts = _cuts(lines, level)
    cuts = [(n, title) for n, title in cuts if n > 0]
    if not cuts:
        return [section]
    pieces: list[tuple[str, str]] = []
    ends = [n for n, _ in cuts[1:]] + [len(lines)]
    for (start, title), end in zip(cuts, ends, strict=True):
        text = "\n".join(lines[start:end]).strip() + "\n"
        if pieces and len(pieces[-1][1]) < MERGE_BELOW:
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + "\n" + text)
        else:
            pieces.append((title, text))
    if len(pieces) > 1 and len(pieces[-1][1]) < MERGE_BELOW:
        last = pieces.pop()
        pieces[-1] = (pieces[-1][0], pieces[-1][1] + "\n" + last[1])
    lead = "\n".join(lines[: cuts[0][0]]).strip() + "\n"
    out = [replace(section, own_text=lead, symptom=_what_you_see(lead))]
    seen: dict[str, int] = {}
    for title, text in pieces:
        slug = _unique(markdown.slugify(title.replace("`", "")) or "part", seen)
        part = Section(
            f"{section.id}{PART}{slug}",
            f"{section.title}: {title}",
            section.path,
            section.url,
            text,
            f"{section.title} {section.page_title}".strip(),
            _sub_headings(text, found),
            section.kind,
            label=title,
            symptom=_what_you_see(text),
        )
        out.extend(parts(part, found) if found < _BOLD_LEVEL else [part])
    return out


def searchable_sections(bundle: Path) -> list[Section]:
    """Every section of the bundle, and the parts of the long ones: what search ranks."""
    return [part for section in bundle_sections(bundle) for part in parts(section)]


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
