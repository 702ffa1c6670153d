"""Error messages a question quotes: the pitfalls ``explain`` would name for them.

A question that pastes an error ("RuntimeError: Tensors must be CUDA and dense") is answered
by the pitfall whose signature matches it, whatever other words it shares with other sections.
The signatures are copied into the search index when it is built (``signature_rows``), so a
search never loads the knowledge files; at query time a signature is compiled only when its
required literal occurs in the question, and matches are ranked as ``explain`` ranks them.
"""

from __future__ import annotations

import re
from pathlib import Path

_QUOTES = re.compile(r"\\{0,4}[`'\"\u2018\u2019\u201c\u201d]")
FLAGS = re.MULTILINE | re.IGNORECASE
"""``diagnose.signatures.FLAGS``, kept here so that a search without a quoted error never imports
``diagnose`` (a test holds the two equal)."""


def knowledge_files() -> list[Path]:
    """The files the stored signatures come from (part of the index's content key)."""
    from fsdp_skill import diagnose

    here = Path(diagnose.__file__).parent
    pitfalls = here.parent / "knowledge" / "pitfalls"
    return [here / "signatures.py", *sorted(pitfalls.glob("*.toml"))]


def signature_rows(section_ids: set[str]) -> list[tuple[str, str, str, int, str]]:
    """``(section id, signature, required literal, anchored, tags)`` for every signature of
    the knowledge's pitfalls that the bundle has a section for."""
    from fsdp_skill import knowledge
    from fsdp_skill.diagnose.signatures import anchored, required_literal

    rows = []
    for pitfall in knowledge.pitfalls():
        sid = f"pitfall:{pitfall.id}"
        if sid not in section_ids:
            continue
        for signature in pitfall.signatures:
            rows.append(
                (
                    sid,
                    signature,
                    required_literal(signature),
                    int(anchored(signature)),
                    " ".join(pitfall.tags),
                )
            )
    return rows


def matched(query: str, rows: list[tuple[str, str, str, int, str]]) -> list[str]:
    """The pitfall sections whose signatures occur in ``query``, most telling first."""
    rough = " ".join(_QUOTES.sub("", query).split()).lower()
    hopeful = [  # a signature with no known literal is tried on the rough text first
        row for row in rows if (row[2] in rough if row[2] else re.search(row[1], rough, FLAGS))
    ]
    if not hopeful:
        return []
    from fsdp_skill.diagnose.normalize import normalize
    from fsdp_skill.diagnose.signatures import Named, Signature, ranked, scan

    by_owner: dict[str, tuple[Named, list[Signature]]] = {}
    for sid, signature, literal, by_line, tags in hopeful:
        owner, sigs = by_owner.setdefault(sid, (Named(sid, tuple(tags.split())), []))
        sigs.append(Signature(signature, literal, bool(by_line)))
    table = [(owner, tuple(sigs)) for owner, sigs in by_owner.values()]
    return [hit.pitfall.id for hit in ranked(scan(normalize(query), table))]
