"""How search orders sections: BM25 over weighted columns, then a few general priors.

BM25 (SQLite FTS5) scores each column separately; the weights favour a section's own title
and sub-headings over its body, and prose over code. The best ``CANDIDATES`` are then
re-ranked with priors that hold for any question: a title whose words the question all uses,
or that names the identifier the query spells out, wins; raw reference entries (docstrings,
table rows) give way to explanations unless named; page summaries and version histories give
way to the sections that answer.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from fsdp_skill.search.tokens import content_words, query_identifiers, title_identifiers

WEIGHTS = (8.0, 1.5, 3.0, 1.0, 1.0, 0.5)
"""BM25 weights of the title, page title, sub-headings, identifier words, prose and code."""

RARE_DOCS = 3
"""An everyday English word gets its glossary words only when fewer sections use it."""
CANDIDATES = 40
"""How many BM25 leaders are re-ranked with the priors below."""
NAME_BOOST = 1.3
"""A section whose title names a code identifier the query spells out (``fully_shard``)."""
REFERENCE_PRIOR = 0.85
"""API entries (raw docstrings) and environment-variable rows (one table row each) are looked
up by name; for a question in words the guides and pitfalls explain more."""
TITLE_BOOST = 1.3
"""Every word of a section's title (two or more) is in the question: it is about that."""
INTRO_PRIOR = 0.8
"""A page's opening summary mentions everything its sections explain."""
HISTORY_PRIOR = 0.7
"""Version-history sections name every API of their page; they answer version questions
(and get the inverse boost for those)."""
_HISTORY_TITLE = re.compile(r"\b(older|versions?)\b", re.IGNORECASE)
_VERSION_NUMBER = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)?(?![\w.])")
_VERSION_WORDS = {"older", "old", "version", "versions", "since", "deprecated", "removed"}
_VERSION_WORDS |= {"upgrade", "legacy", "import", "available", "introduced", "added"}


def match_expression(terms: list[str]) -> str:
    """The FTS5 query for a list of terms: any of them, each quoted."""
    return " OR ".join('"' + term.replace('"', "") + '"' for term in terms)


def rare_in(db: sqlite3.Connection) -> Callable[[str], bool]:
    """Whether the references use a word in fewer than ``RARE_DOCS`` sections."""
    from fsdp_skill.search.index import count_matches

    def rare(term: str) -> bool:
        return count_matches(db, match_expression([term]), RARE_DOCS) < RARE_DOCS

    return rare


def rerank(rows: list[tuple], query: str, terms: list[str], k: int) -> list[tuple]:
    """Re-rank BM25 leaders ``(rowid, id, title, path, url, kind, intro, bm25)`` with priors."""
    named = query_identifiers(query)
    about_versions = bool(_VERSION_WORDS.intersection(terms) or _VERSION_NUMBER.search(query))
    asked = frozenset().union(*(content_words(term) for term in terms))
    scored = []
    for row in rows:
        _, _, title, _, _, kind, intro, bm25 = row
        score = -bm25
        title_words = content_words(title)
        if len(title_words) >= 2 and title_words <= asked:
            score *= TITLE_BOOST
        if _HISTORY_TITLE.search(title):
            score *= 1 / HISTORY_PRIOR if about_versions else HISTORY_PRIOR
        if named and named & title_identifiers(title):
            score *= NAME_BOOST
        elif kind in ("api", "env"):
            score *= REFERENCE_PRIOR
        if intro:
            score *= INTRO_PRIOR
        scored.append((score, row))
    scored.sort(key=lambda pair: -pair[0])
    return [(*row[:7], score) for score, row in scored[:k]]
