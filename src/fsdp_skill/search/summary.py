"""Short readable text from sections: what a result is about, and Markdown made plain.

Search results carry a one- or two-sentence summary, so that an agent can pick the section to
open without opening several; ``show --with-pitfalls`` lists the pitfalls a section links, one
line each. Terminal output uses ``plain`` so that no ``**`` or table pipes reach the reader.
"""

from __future__ import annotations

import re

SUMMARY_CHARS = 300
"""A summary is cut at a word boundary after about this many characters."""
PITFALL_LINK = re.compile(r"pitfalls\.md#([a-z0-9][a-z0-9-]*)|\bpitfall:([a-z0-9][a-z0-9-]*)")
_FIELD = re.compile(r"^\*\*(\w+)\.\*\*\s*(.*?)(?=\n\s*\n|\Z)", re.DOTALL | re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+(?=[A-Z`\"(\u3400-\u9fff])")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_META_LINE = re.compile(r"^\s*(\*[^*].*\*|Source:.*|Docs:.*|<!--.*-->)\s*$")
_RULE_CELL = re.compile(r"^:?-{3,}:?$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def plain(markdown: str) -> str:
    """One line of readable text: emphasis markers, heading marks, link targets and table
    pipes dropped (cells joined by " · ")."""
    lines = []
    for line in markdown.split("\n"):
        if _TABLE_RULE.match(line):
            continue
        line = re.sub(r"^\s*#{1,6}\s+", "", line)
        if line.strip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            line = " · ".join(c for c in cells if c and not _RULE_CELL.match(c)) + ";"
        lines.append(line)
    text = _LINK.sub(r"\1", " ".join(lines))
    text = re.sub(r"\*\*|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)", "", text)
    text = re.sub(r"\|\s*:?-{3,}:?\s*(?=\|)", "|", text)  # a table rule inside one line
    text = re.sub(r"(?:\s*\|\s*)+", " · ", text)  # pipes left in a one-line table row
    return re.sub(r"\s+", " ", text).strip(" ·;")


def first_sentences(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The leading sentences of a plain text, as many as fit in about ``limit`` characters."""
    out = ""
    for sentence in _SENTENCE_END.split(text.strip()):
        if out and len(out) + len(sentence) > limit:
            break
        out = f"{out} {sentence}".strip()
    if len(out) > limit:
        out = out[:limit].rsplit(" ", 1)[0] + "…"
    return out


def _prose(text: str) -> str:
    """The section's text without its headings, code blocks, tables and metadata lines."""
    from fsdp_skill import markdown

    kept = []
    for line in markdown.strip_code(text).split("\n"):
        stripped = line.strip()
        if stripped.startswith(("#", "|")) or _META_LINE.match(line):
            continue
        kept.append(line)
    return plain("\n".join(kept))


def pitfall_fields(text: str) -> dict[str, str]:
    """A pitfall section's ``Symptom``, ``Cause`` and ``Fix`` paragraphs, as plain text."""
    return {name.lower(): plain(body) for name, body in _FIELD.findall(text)}


def section_summary(text: str, kind: str) -> str:
    """What a section says, in a sentence or two: a pitfall's symptom and fix, an environment
    variable's effect, else the first sentences of its prose."""
    if kind == "pitfall":
        fields = pitfall_fields(text)
        symptom = first_sentences(fields.get("symptom", ""), SUMMARY_CHARS // 2)
        fix = first_sentences(fields.get("fix", ""), SUMMARY_CHARS // 2)
        return " ".join(part for part in (symptom, fix and f"Fix: {fix}") if part)
    if kind == "env":  # its title says what it does: tell what to set and when
        fields = dict(re.findall(r"^- \*\*([^*]+)\*\*: (.*)$", text, re.MULTILINE))
        parts = [f"Values: {fields['values']}." if fields.get("values") else ""]
        parts.append(fields.get("when to set it", ""))
        return first_sentences(plain(" ".join(p for p in parts if p)))
    prose = _prose(text)
    if not prose:  # a table, a list of links: the cells are what it says
        prose = plain(re.sub(r"^#{1,6}\s.*$", "", text, flags=re.MULTILINE))
    return first_sentences(prose)


def linked_pitfalls(text: str) -> list[str]:
    """The ids of the pitfalls a Markdown text links (``pitfalls.md#id`` or ``pitfall:id``),
    in order of first mention."""
    found: dict[str, None] = {}
    for match in PITFALL_LINK.finditer(text):
        found.setdefault(match.group(1) or match.group(2), None)
    return list(found)


def pitfall_line(text: str) -> str:
    """A pitfall in one line: its title and the first sentence of its fix."""
    title = re.search(r"^\*\*(.+?)\*\*", text, re.MULTILINE)
    fix = first_sentences(pitfall_fields(text).get("fix", ""), SUMMARY_CHARS // 2)
    name = plain(title.group(1)) if title else ""
    return f"{name}. Fix: {fix}" if fix else name
