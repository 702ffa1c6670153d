"""Search the skill's references and show one whole section.

``search(query, k)`` ranks the sections of the bundle's reference pages (guides, pitfalls,
environment variables, API references, crawled docs) with SQLite FTS5's BM25, title and
headings weighted over body; ``show(id)`` returns the section in full. Only the standard
library is imported: this is the agent's fast path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from fsdp_skill.errors import UsageError

WEIGHTS = (8.0, 1.5, 3.0, 1.0, 1.0)
"""BM25 weights of the title, page title, sub-headings, identifier words and body columns."""

RARE_DOCS = 3
"""An everyday English word gets its glossary words only when fewer sections use it."""
CANDIDATES = 40
"""How many BM25 leaders are re-ranked with the priors below."""
NAME_BOOST = 1.3
"""A section whose title names a code identifier the query spells out (``fully_shard``)."""
REFERENCE_PRIOR = 0.85
"""API entries (raw docstrings) and environment-variable rows (one table row each) are looked
up by name; for a question in words the guides and pitfalls explain more."""
INTRO_PRIOR = 0.8
"""A page's opening summary mentions everything its sections explain."""
HISTORY_PRIOR = 0.7
"""Version-history sections name every API of their page; they answer version questions
(and get the inverse boost for those)."""
_HISTORY_TITLE = re.compile(r"\b(older|versions?)\b", re.IGNORECASE)
_VERSION_NUMBER = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)?(?![\w.])")
_VERSION_WORDS = {"older", "old", "version", "versions", "since", "deprecated", "removed"}
_VERSION_WORDS |= {"upgrade", "legacy", "import", "available", "introduced", "added"}

MAX_K = 50


def bundle_dir() -> Path:
    """The bundle searched: ``$FSDP_SKILL_BUNDLE`` when set, else the one shipped."""
    explicit = os.environ.get("FSDP_SKILL_BUNDLE")
    if explicit:
        return Path(explicit)
    from fsdp_skill.bundle_files import BUNDLE_DIR

    return BUNDLE_DIR


def build_index(bundle: Path | None = None) -> Path:
    """Build the search index of ``bundle`` now (install and render call this), return its file.

    Searching builds a missing index too; building ahead keeps the first search fast.
    """
    from fsdp_skill.search import index

    return index.build(bundle or bundle_dir())


def match_expression(terms: list[str]) -> str:
    """The FTS5 query for a list of terms: any of them, each quoted."""
    return " OR ".join('"' + term.replace('"', "") + '"' for term in terms)


def _rare_in(db) -> Callable[[str], bool]:
    """Whether the references use a word in fewer than ``RARE_DOCS`` sections."""

    def rare(term: str) -> bool:
        expression = match_expression([term])
        found = db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)",
            (expression, RARE_DOCS),
        ).fetchone()[0]
        return found < RARE_DOCS

    return rare


def _snippet(raw: str) -> str:
    return re.sub(r"\s+", " ", raw).strip()


def _rank(rows: list[tuple], query: str, terms: list[str], k: int) -> list[tuple]:
    """Re-rank BM25 leaders ``(rowid, id, title, path, url, kind, intro, bm25)`` with priors."""
    from fsdp_skill.search.tokens import query_identifiers, title_identifiers

    named = query_identifiers(query)
    about_versions = bool(_VERSION_WORDS.intersection(terms) or _VERSION_NUMBER.search(query))
    scored = []
    for row in rows:
        _, _, title, _, _, kind, intro, bm25 = row
        score = -bm25
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


def search(query: str, k: int = 5, bundle: Path | None = None) -> dict:
    """The ``k`` best sections for ``query``: ``{"query", "results": [...]}``."""
    if not query or not query.strip():
        raise UsageError("empty query: say what you are looking for")
    if k < 1 or k > MAX_K:
        raise UsageError(f"-k must be between 1 and {MAX_K}")
    from fsdp_skill.search import index
    from fsdp_skill.search.tokens import query_terms

    db = index.connect(bundle or bundle_dir())
    terms = query_terms(query, rare=_rare_in(db))
    if not terms:
        return {"query": query, "results": []}
    expression = match_expression(terms)
    leaders = db.execute(
        "SELECT s.rowid, s.id, s.title, s.path, s.url, s.kind, s.intro,"
        " bm25(fts, ?, ?, ?, ?, ?) AS score"
        " FROM fts JOIN section s ON s.rowid = fts.rowid"
        " WHERE fts MATCH ? ORDER BY score LIMIT ?",
        (*WEIGHTS, expression, max(CANDIDATES, 2 * k)),
    ).fetchall()
    ranked = _rank(leaders, query, terms, k)
    rowids = [row[0] for row in ranked]
    marks = ",".join("?" * len(rowids))
    snippets = dict(
        db.execute(  # snippets only for the winners: they are the costly part
            "SELECT rowid, snippet(fts, 4, '**', '**', '…', 20) FROM fts"
            f" WHERE fts MATCH ? AND rowid IN ({marks})",
            (expression, *rowids),
        ).fetchall()
    )
    results = [
        {
            "id": sid,
            "title": title,
            "path": path,
            "url": url,
            "score": round(score, 3),
            "snippet": _snippet(snippets.get(rowid, "")),
        }
        for rowid, sid, title, path, url, _, _, score in ranked
    ]
    return {"query": query, "results": results}


def show(section_id: str, bundle: Path | None = None) -> dict:
    """The whole section ``section_id``: ``{"id", "title", "path", "url", "text"}``."""
    from fsdp_skill.search import index

    db = index.connect(bundle or bundle_dir())
    row = db.execute(
        "SELECT id, title, path, url, text FROM section WHERE id = ?", (section_id,)
    ).fetchone()
    if row is None:
        close = db.execute(
            "SELECT id FROM section WHERE id LIKE ? ORDER BY length(id) LIMIT 5",
            (f"%{section_id.split('#')[-1].split(':')[-1]}%",),
        ).fetchall()
        hint = f"; did you mean {', '.join(r[0] for r in close)}?" if close else ""
        raise UsageError(f"no section {section_id!r}{hint}")
    return dict(zip(("id", "title", "path", "url", "text"), row, strict=True))
