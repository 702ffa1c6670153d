"""Search the skill's references and show one whole section.

``search(query, k)`` ranks the sections of the bundle's reference pages (guides, pitfalls,
environment variables, API references, crawled docs) with SQLite FTS5's BM25, title and
headings weighted over body; ``show(id)`` returns the section in full. Only the standard
library is imported: this is the agent's fast path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fsdp_skill.errors import UsageError

WEIGHTS = (8.0, 3.0, 2.0, 1.0)
"""BM25 weights of the title, headings, keywords and body columns."""

MAX_K = 50


def bundle_dir() -> Path:
    """The bundle searched: ``$FSDP_SKILL_BUNDLE`` when set, else the one shipped."""
    explicit = os.environ.get("FSDP_SKILL_BUNDLE")
    if explicit:
        return Path(explicit)
    from fsdp_skill.bundle_files import BUNDLE_DIR

    return BUNDLE_DIR


def match_expression(query: str) -> str:
    """The FTS5 query for a user's question: any of its words, each quoted."""
    from fsdp_skill.search.tokens import query_terms

    return " OR ".join('"' + term.replace('"', "") + '"' for term in query_terms(query))


def _snippet(raw: str) -> str:
    return re.sub(r"\s+", " ", raw).strip()


def search(query: str, k: int = 5, bundle: Path | None = None) -> dict:
    """The ``k`` best sections for ``query``: ``{"query", "results": [...]}``."""
    if not query or not query.strip():
        raise UsageError("empty query: say what you are looking for")
    if k < 1 or k > MAX_K:
        raise UsageError(f"-k must be between 1 and {MAX_K}")
    from fsdp_skill.search import index

    expression = match_expression(query)
    results: list[dict] = []
    if expression:
        db = index.connect(bundle or bundle_dir())
        try:
            # Rank first, then build snippets for the k winners only (snippets are costly).
            rows = db.execute(
                "SELECT s.id, s.title, s.path, s.url, bm25(fts, ?, ?, ?, ?) AS score,"
                " snippet(fts, 3, '**', '**', '…', 20)"
                " FROM fts JOIN section s ON s.rowid = fts.rowid"
                " WHERE fts MATCH ? AND fts.rowid IN ("
                "  SELECT rowid FROM fts WHERE fts MATCH ?"
                "  ORDER BY bm25(fts, ?, ?, ?, ?) LIMIT ?)"
                " ORDER BY score",
                (*WEIGHTS, expression, expression, *WEIGHTS, k),
            ).fetchall()
        finally:
            db.close()
        results = [
            {
                "id": sid,
                "title": title,
                "path": path,
                "url": url,
                "score": round(-score, 3),
                "snippet": _snippet(snippet),
            }
            for sid, title, path, url, score, snippet in rows
        ]
    return {"query": query, "results": results}


def show(section_id: str, bundle: Path | None = None) -> dict:
    """The whole section ``section_id``: ``{"id", "title", "path", "url", "text"}``."""
    from fsdp_skill.search import index

    db = index.connect(bundle or bundle_dir())
    try:
        row = db.execute(
            "SELECT id, title, path, url, text FROM section WHERE id = ?", (section_id,)
        ).fetchone()
        if row is None:
            close = db.execute(
                "SELECT id FROM section WHERE id LIKE ? ORDER BY length(id) LIMIT 5",
                (f"%{section_id.split('#')[-1].split(':')[-1]}%",),
            ).fetchall()
    finally:
        db.close()
    if row is None:
        hint = f"; did you mean {', '.join(r[0] for r in close)}?" if close else ""
        raise UsageError(f"no section {section_id!r}{hint}")
    return dict(zip(("id", "title", "path", "url", "text"), row, strict=True))
