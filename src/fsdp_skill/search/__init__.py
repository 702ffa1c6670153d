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

MAX_K = 50
MAX_ID = 300
"""Characters a section id may have (the longest real one has under a hundred)."""


def bundle_dir() -> Path:
    """The bundle searched: ``$FSDP_SKILL_BUNDLE`` when set, else the one shipped."""
    explicit = os.environ.get("FSDP_SKILL_BUNDLE")
    if explicit:
        return Path(explicit)
    from fsdp_skill.bundle_files import BUNDLE_DIR

    return BUNDLE_DIR


def _checked(bundle: Path | None) -> Path:
    """The bundle to search, which must have a references folder."""
    bundle = Path(bundle) if bundle else bundle_dir()
    if not (bundle / "references").is_dir():
        raise UsageError(f"{bundle} has no references/ folder to search")
    return bundle


def build_index(bundle: Path | None = None) -> Path:
    """Build the search index of ``bundle`` now (install and render call this), return its file.

    Searching builds a missing index too; building ahead keeps the first search fast.
    """
    from fsdp_skill.search import index

    return index.build(_checked(bundle))


def _snippet(raw: str) -> str:
    """The excerpt with matched words in bold and the page's own bold markers dropped.

    Words the tokenizer split out of one identifier (``init_device_mesh``) become one
    highlight instead of a bold fragment per part.
    """
    from fsdp_skill.search.index import HIT_CLOSE, HIT_OPEN

    text = raw.replace("**", "")
    text = re.sub(f"{HIT_CLOSE}([_.]?){HIT_OPEN}", r"\1", text)
    text = text.replace(HIT_OPEN, "**").replace(HIT_CLOSE, "**")
    return re.sub(r"\s+", " ", text).strip()


def search(query: str, k: int = 5, bundle: Path | None = None) -> dict:
    """The ``k`` best sections for ``query``: ``{"query", "results": [...]}``."""
    if not query or not query.strip():
        raise UsageError("empty query: say what you are looking for")
    if k < 1 or k > MAX_K:
        raise UsageError(f"-k must be between 1 and {MAX_K}")
    from fsdp_skill.search import index

    return index.run(_checked(bundle), lambda db: _ranked(db, query, k))


def _spelling_fixes(db, weighted: dict[str, int]) -> dict[str, int]:
    """For each word of the query that no section uses, the word one letter away that most
    sections use ("notenook" -> notebook, "moduel" -> module), as a stand-in."""
    from fsdp_skill.search import index
    from fsdp_skill.search.tokens import STAND_IN, STOP_WORDS, one_letter_off, typo_candidates

    fixes: dict[str, int] = {}
    for word in typo_candidates(weighted):
        if index.matches_any(db, word):  # as the index stems it: "crashes" finds "crash"
            continue
        near = index.known_words(db, sorted(one_letter_off(word) - STOP_WORDS))
        if near:
            # two letters swapped is the commonest slip ("moduel": module, not model)
            best = max(near, key=lambda w: (sorted(w) == sorted(word), near[w], w))
            fixes.setdefault(best, STAND_IN)
    return {w: n for w, n in fixes.items() if w not in weighted}


def _ranked(db, query: str, k: int) -> dict:
    from fsdp_skill.search import errors, index, rank
    from fsdp_skill.search.tokens import han_bigrams, weighted_terms

    weighted = weighted_terms(query)
    if not weighted:  # nothing the index knows: pairs of characters alone match too loosely
        return {"query": query, "results": []}
    weighted.update(_spelling_fixes(db, weighted))
    terms = list(weighted)
    expression = rank.weighted_expression(weighted)
    leaders = index.leaders(db, expression, rank.weights(query), max(rank.CANDIDATES, 2 * k))
    ranked = rank.rerank(leaders, query, terms, len(leaders))
    votes = rank.asked_votes(index.asked_like(db, expression, rank.ASKED_NEIGHBOURS))
    grams = han_bigrams(query)
    if grams:  # Chinese: earlier questions that share its words, glossary or not
        pairs = rank.match_expression(list(dict.fromkeys(grams)))
        alike = index.asked_like(db, pairs, rank.HAN_NEIGHBOURS, table="asked_han")
        votes = rank.joined_votes(votes, rank.asked_votes(alike))
    found = {row[1] for row in ranked}
    more = index.rows(db, [sid for sid in votes if sid not in found])
    ranked = rank.lend_answers(ranked, more, votes)[:k]
    quoted = errors.matched(query, index.signatures(db))
    if quoted:  # an error message the question pastes: explain's pitfalls answer it
        ranked = rank.first(index.rows(db, quoted), ranked, k)
    rowids = [row[0] for row in ranked]
    snippets = index.snippets(db, expression, rowids)
    summaries = index.summaries(db, rowids)
    results = [
        {
            "id": sid,
            "title": title,
            "path": path,
            "url": url,
            "score": round(score, 3),
            "snippet": _snippet(snippets.get(rowid, "")),
            "summary": summaries.get(rowid, ""),
        }
        for rowid, sid, title, path, url, *_, score in ranked
    ]
    return {"query": query, "results": results}


def show(section_id: str, bundle: Path | None = None, with_pitfalls: bool = False) -> dict:
    """The whole section ``section_id``: ``{"id", "title", "path", "url", "text"}``.

    ``with_pitfalls`` adds ``"pitfalls": [{"id", "title", "summary"}]``: the pitfalls the
    section links and, for a guide, those its page lists in a section of links only. A page's
    id shows its opening section, with ``"sections": [{"id", "title"}]``, the page's other
    sections in order, to show next.
    """
    from fsdp_skill.search import index

    if len(section_id) > MAX_ID:
        raise UsageError(
            f"no section {section_id[:60]!r}… ({len(section_id):,} characters; "
            f"section ids have at most {MAX_ID})"
        )

    def lookup(db) -> tuple[dict | None, list[str]]:
        found = index.section(db, section_id)
        if found is not None:
            listed = index.page_sections(db, section_id)
            if listed:
                found["sections"] = listed
            if with_pitfalls:
                found["pitfalls"] = _linked_pitfalls(db, found)
            return found, []
        return None, index.similar_ids(db, section_id.split("#")[-1].split(":")[-1])

    found, close = index.run(_checked(bundle), lookup)
    if found is None:
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"no section {section_id!r}{hint}")
    return found


def _linked_pitfalls(db, section: dict) -> list[dict]:
    """One line for each pitfall ``section`` links (or its page lists), except itself."""
    from fsdp_skill.search import index, summary

    texts = [section["text"]]
    if not section["id"].startswith(("pitfall:", "api:", "env:")):
        texts += index.link_lists(db, section["path"])
    out = []
    for pid in summary.linked_pitfalls("\n".join(texts)):
        found = index.section(db, f"pitfall:{pid}")
        if found and found["id"] != section["id"]:
            line = summary.pitfall_line(found["text"])
            out.append({"id": found["id"], "title": found["title"], "summary": line})
    return out
