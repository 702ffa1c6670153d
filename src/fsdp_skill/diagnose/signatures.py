"""Error signatures and the scan that finds them in a normalised text.

A pitfall carries regular expressions (its signatures) for the error messages it explains.
This module compiles and matches them against a ``Normalized`` text and ranks what matched;
it does not know where the signatures come from, so ``explain`` feeds it the knowledge's
pitfalls and ``search`` the copy stored in its index (without loading the knowledge files).
A signature is tried only when its longest literal occurs in the text, so a big log costs one
substring search per signature.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from fsdp_skill.diagnose.normalize import Normalized

CONSEQUENCE_TAG = "consequence"
"""Pitfalls tagged so describe the aftermath of another failure (a launcher's summary, a peer
that hung up); they rank below the errors that explain the failure."""
GENERIC_TAG = "generic"
"""Pitfalls tagged so are a family of errors many causes report through (an NCCL error code,
a timeout); a more specific error in the same text ranks above them."""


class Owner(Protocol):
    """What a signature belongs to: a pitfall, or search's record of one."""

    id: str
    tags: tuple[str, ...]


class Named:
    """An owner known only by its id and tags: an entry of explain's cached table, or of the
    copy search stores in its index."""

    __slots__ = ("id", "tags")

    def __init__(self, owner_id: str, tags: tuple[str, ...]) -> None:
        self.id = owner_id
        self.tags = tags


FLAGS = re.MULTILINE | re.IGNORECASE
"""How every signature is matched: any case, ``^`` and ``$`` at line ends."""


@dataclass(frozen=True)
class Signature:
    regex: str
    literal: str
    """Lower-cased text every match contains ("" when none can be told)."""
    by_line: bool
    """Anchored at line starts or ends: matched against the newline-joined view."""

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled regex, on first use: a signature whose literal is not in the text is
        never compiled (compiling all of them was most of a cold ``explain``)."""
        return re.compile(self.regex, FLAGS)


@dataclass
class Hit:
    pitfall: Owner
    first: int
    line: int
    signatures: int = 0
    count: int = 0
    ranks: set[int] = field(default_factory=set)
    longest: int = 0
    aftermath: bool = False
    """In this text the match is the aftermath of another error (ranked as a consequence)."""


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


def anchored(signature: str) -> bool:
    """Whether ``signature`` is anchored at line starts or ends (matched line by line)."""
    return "^" in signature or "$" in signature


def prepared(signature: str, literal: str | None = None) -> Signature:
    """``signature`` ready to match as ``explain`` does (compiled when first tried)."""
    return Signature(
        signature,
        required_literal(signature) if literal is None else literal,
        anchored(signature),
    )


def scan(norm: Normalized, table: Iterable[tuple[Owner, tuple[Signature, ...]]]) -> list[Hit]:
    """One hit for each owner with a signature that occurs in ``norm``, unordered."""
    hits = []
    for pitfall, sigs in table:
        hit: Hit | None = None
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
                    hit = Hit(pitfall, m.start(), line)
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


def confidence(hit: Hit) -> float:
    """How surely the hit names the failure: specific errors above generic families, and
    those above the aftermath of another failure; short matches count less."""
    tags = hit.pitfall.tags
    consequence = hit.aftermath or CONSEQUENCE_TAG in tags
    score = 0.5 if consequence else 0.7 if GENERIC_TAG in tags else 0.9
    score += 0.03 * (hit.signatures - 1)
    if hit.longest < 20:
        score -= 0.2
    return round(min(score, 0.99), 2)


def ranked(hits: list[Hit]) -> list[Hit]:
    """The hits most telling first, then by where they first appear."""
    return sorted(hits, key=lambda h: (-confidence(h), h.first))
