"""``explain``: find every known error in a text and say what it means and what to do.

The knowledge's pitfalls carry the error signatures (regular expressions); this module only
matches them, against the normalised text (see ``normalize``), case-insensitively. A signature
is tried only when its longest literal occurs in the text, so a big log costs one substring
search per signature. Errors rank by how telling they are: a specific cause above the generic
family it is reported through (``generic`` pitfalls: NCCL's error codes, timeouts), and those
above the aftermath of another failure (``consequence`` pitfalls: a launcher's summary, a peer
that hung up); then by where they first appear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from fsdp_skill import knowledge
from fsdp_skill.diagnose import details
from fsdp_skill.diagnose.normalize import Normalized, normalize
from fsdp_skill.errors import UsageError

MATCHED_CHARS = 300
"""How much of a matched line is shown."""

CONSEQUENCE_TAG = "consequence"
"""Pitfalls tagged so describe the aftermath of another failure (a launcher's summary, a peer
that hung up); they rank below the errors that explain the failure."""
GENERIC_TAG = "generic"
"""Pitfalls tagged so are a family of errors many causes report through (an NCCL error code,
a timeout); a more specific error in the same text ranks above them."""

PITFALLS_REF = "references/pitfalls.md#{id}"
SHOW = "pitfall:{id}"


@dataclass(frozen=True)
class Signature:
    pattern: re.Pattern[str]
    literal: str
    """Lower-cased text every match contains ("" when none can be told)."""
    by_line: bool
    """Anchored at line starts or ends: matched against the newline-joined view."""


@dataclass
class _Hit:
    pitfall: knowledge.Pitfall
    first: int
    line: int
    signatures: int = 0
    count: int = 0
    ranks: set[int] = field(default_factory=set)
    longest: int = 0


def required_literal(pattern: str) -> str:
    """The longest run of plain characters that every match of ``pattern`` must contain."""
    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return ""
    best, run = "", ""
    for op, arg in parsed:
        if op is sre_parse.LITERAL:
            run += chr(arg)
            continue
        best, run = max(best, run, key=len), ""
    return max(best, run, key=len).lower()


def _anchored(signature: str) -> bool:
    return "^" in signature or "$" in signature


def signature_matches(signature: str, text: str) -> bool:
    """Whether ``signature`` finds ``text`` as ``explain`` matches it (normalised, any case)."""
    norm = normalize(text)
    view = norm.by_line if _anchored(signature) else norm.joined
    return re.compile(signature, re.MULTILINE | re.IGNORECASE).search(view) is not None


@lru_cache(maxsize=1)
def _signatures() -> tuple[tuple[knowledge.Pitfall, tuple[Signature, ...]], ...]:
    table = []
    for pitfall in knowledge.pitfalls():
        sigs = tuple(
            Signature(
                re.compile(s, re.MULTILINE | re.IGNORECASE),
                required_literal(s),
                _anchored(s),
            )
            for s in pitfall.signatures
        )
        if sigs:
            table.append((pitfall, sigs))
    return tuple(table)


def _confidence(hit: _Hit) -> float:
    tags = hit.pitfall.tags
    score = 0.5 if CONSEQUENCE_TAG in tags else 0.7 if GENERIC_TAG in tags else 0.9
    score += 0.03 * (hit.signatures - 1)
    if hit.longest < 20:
        score -= 0.2
    return round(min(score, 0.99), 2)


def _hits(norm: Normalized) -> list[_Hit]:
    hits = []
    for pitfall, sigs in _signatures():
        hit: _Hit | None = None
        for sig in sigs:
            if sig.literal and sig.literal not in norm.lowered:
                continue
            view = norm.by_line if sig.by_line else norm.joined
            matched_any = False
            for m in sig.pattern.finditer(view):
                if m.end() == m.start():
                    continue
                line = norm.line_at(m.start())
                if hit is None:
                    hit = _Hit(pitfall, m.start(), line)
                elif m.start() < hit.first:
                    hit.first, hit.line = m.start(), line
                hit.count += 1
                hit.longest = max(hit.longest, m.end() - m.start())
                if norm.ranks[line] is not None:
                    hit.ranks.add(norm.ranks[line])
                matched_any = True
            if matched_any and hit is not None:
                hit.signatures += 1
        if hit is not None:
            hits.append(hit)
    return hits


def _shown(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MATCHED_CHARS else line[: MATCHED_CHARS - 1] + "…"


def explain(text: str) -> dict:
    """Every pitfall whose signature occurs in ``text``, most telling first.

    With no known error, ``related`` holds the reference sections closest to the text's
    exception line (``searched``). A log with several ranks' collectives also gets ``hang``:
    where the ranks diverged, as ``fsdp-skill hang`` says it.
    """
    if not text or not text.strip():
        raise UsageError("empty input: give an error message, --file LOG, or pipe a log into stdin")
    norm = normalize(text)
    hits = sorted(_hits(norm), key=lambda h: (-_confidence(h), h.first))
    matches = []
    for h in hits:
        p = h.pitfall
        match = {
            "id": p.id,
            "title": p.title,
            "category": p.category,
            "severity": p.severity,
            "symptom": p.symptom.strip(),
            "cause": p.cause.strip(),
            "fix": p.fix.strip(),
            "refs": [*p.links, PITFALLS_REF.format(id=p.id)],
            "show": SHOW.format(id=p.id),
            "confidence": _confidence(h),
            "matched": _shown(norm.lines[h.line]),
            "line": h.line + 1,
            "occurrences": h.count,
            "ranks": sorted(h.ranks),
        }
        detail = details.detail(p.id, norm)
        if detail:
            match["detail"] = detail
        matches.append(match)
    result: dict = {"matches": matches, "related": [], "searched": None, "hang": None}
    if not matches:
        from fsdp_skill.diagnose.fallback import related

        result["related"], result["searched"] = related(text)
    from fsdp_skill.diagnose.divergence import analyse_text

    result["hang"] = analyse_text(text)
    return result
