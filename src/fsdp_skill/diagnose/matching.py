"""``explain``: find every known error in a text and say what it means and what to do.

The knowledge's pitfalls carry the error signatures (regular expressions); this module only
matches them. Rank prefixes (``[rank3]:``) are removed before matching, so a signature sees
the message as the rank printed it, and the ranks that printed it are reported.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from fsdp_skill import knowledge
from fsdp_skill.diagnose.prefixes import strip_prefixes

MATCHED_CHARS = 300
"""How much of a matched line is shown."""

CONSEQUENCE_TAG = "consequence"
"""Pitfalls tagged so describe the aftermath of another failure (a launcher's summary, a peer
that hung up); they rank below the errors that explain the failure."""

PITFALLS_REF = "references/pitfalls.md#{id}"


@dataclass
class _Hit:
    pitfall: knowledge.Pitfall
    first: int
    """Offset of the earliest match."""
    line: int
    matched: str
    signatures: int
    count: int
    ranks: set[int]
    longest: int


def _line_at(offset: int, starts: list[int]) -> int:
    return bisect_right(starts, offset) - 1


def _matched_line(text: str, start: int, end: int) -> str:
    """The whole line(s) of a match, trimmed: what the user should recognise."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    snippet = text[line_start : line_end if line_end >= 0 else len(text)].strip()
    return snippet if len(snippet) <= MATCHED_CHARS else snippet[: MATCHED_CHARS - 1] + "…"


def _confidence(hit: _Hit) -> float:
    score = 0.5 if CONSEQUENCE_TAG in hit.pitfall.tags else 0.9
    score += 0.03 * (hit.signatures - 1)
    if hit.longest < 20:
        score -= 0.2
    return round(min(score, 0.99), 2)


def _hits(text: str, ranks: list[int | None]) -> list[_Hit]:
    starts = [0]
    starts += [m.end() for m in re.finditer("\n", text)]
    hits = []
    for pitfall in knowledge.pitfalls():
        hit: _Hit | None = None
        for pattern in pitfall.compiled_signatures():
            matched_any = False
            for m in pattern.finditer(text):
                if m.end() == m.start():
                    continue
                line = _line_at(m.start(), starts)
                if hit is None:
                    hit = _Hit(pitfall, m.start(), line, "", 0, 0, set(), 0)
                if m.start() <= hit.first:
                    hit.first, hit.line = m.start(), line
                    hit.matched = _matched_line(text, m.start(), m.end())
                if not hit.matched:
                    hit.matched = _matched_line(text, m.start(), m.end())
                hit.count += 1
                hit.longest = max(hit.longest, m.end() - m.start())
                if ranks[line] is not None:
                    hit.ranks.add(ranks[line])
                matched_any = True
            if matched_any and hit is not None:
                hit.signatures += 1
        if hit is not None:
            hits.append(hit)
    return hits


def explain(text: str) -> dict:
    """Every pitfall whose signature occurs in ``text``, most telling first."""
    clean, ranks = strip_prefixes(text)
    hits = _hits(clean, ranks)
    hits.sort(key=lambda h: (-_confidence(h), h.first))
    matches = []
    for h in hits:
        p = h.pitfall
        matches.append(
            {
                "id": p.id,
                "title": p.title,
                "category": p.category,
                "severity": p.severity,
                "symptom": p.symptom.strip(),
                "cause": p.cause.strip(),
                "fix": p.fix.strip(),
                "refs": [*p.links, PITFALLS_REF.format(id=p.id)],
                "confidence": _confidence(h),
                "matched": h.matched,
                "line": h.line + 1,
                "occurrences": h.count,
                "ranks": sorted(h.ranks),
            }
        )
    return {"matches": matches}
