"""Questions asked before, and the sections that answered them.

``knowledge/asked.toml`` holds questions people asked in public (GitHub issues, forums), each
with the sections that answer it. The index stores their search terms; a new question that
reads like an old one lifts the old one's answers, the way a search engine learns from what
was asked before. It helps most where the question's words point elsewhere: "The DDP hung up
at torch.nn.parallel.DistributedDataParallel(model)" shares its words with the DDP pitfalls,
but earlier questions phrased like it were answered by the hang triage.

Read only when the index is built: a search never parses the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

ASKED_FILE = Path(__file__).resolve().parent.parent / "knowledge" / "asked.toml"
GUIDE = "guide:"
"""A label ``guide:<id>``: any section of that guide; stored as the guide's opening section."""


Asked = list[tuple[str, tuple[str, ...]]]
"""Questions and the section ids that answer them, as ``load`` returns them."""


def load(path: Path | None = None) -> Asked:
    """``(question, answering section ids)`` for every question of ``path`` (default: the
    shipped file; none if absent)."""
    return [(e["q"], section_ids(e)) for e in load_entries(path)]


def load_entries(path: Path | None = None) -> list[dict]:
    """The entries of ``path`` (default: the shipped file) as written: ``{"q", "source", "ids"}``."""
    path = path or ASKED_FILE
    if not path.is_file():
        return []
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    return tomllib.loads(path.read_text(encoding="utf-8")).get("asked", [])


def section_ids(entry: dict) -> tuple[str, ...]:
    """The sections that answer one entry's question."""
    return tuple(section_id(label) for label in entry["ids"])


def section_id(label: str) -> str:
    """The section a label names (``guide:fsdp2`` -> ``fsdp2``, the guide's opening)."""
    return label[len(GUIDE) :] if label.startswith(GUIDE) else label


def rows(asked: Asked, section_ids: set[str]) -> list[tuple[str, str]]:
    """``(section id, search terms)`` for each question and each of its answers the bundle has.

    The terms are the question as a search reads it (identifiers split, Chinese through the
    glossary), a term repeated as often as it weighs, so old and new questions meet in the
    same words."""
    from fsdp_skill.search.tokens import weighted_terms

    def terms(question: str) -> str:
        return " ".join(t for t, n in weighted_terms(question).items() for _ in range(n))

    return _per_answer(asked, section_ids, terms)


def han_rows(asked: Asked, section_ids: set[str]) -> list[tuple[str, str]]:
    """``(section id, Chinese character pairs)`` for each Chinese question and each of its
    answers the bundle has: Chinese questions meet earlier ones in the words they share even
    where the glossary knows neither."""
    from fsdp_skill.search.tokens import han_bigrams

    return _per_answer(asked, section_ids, lambda question: " ".join(han_bigrams(question)))


def _per_answer(
    asked: Asked, section_ids: set[str], indexed: Callable[[str], str]
) -> list[tuple[str, str]]:
    """``(section id, indexed(question))`` for each answer the bundle has, once per question;
    questions whose indexed text is empty are left out."""
    out = []
    for question, answers in asked:
        text = indexed(question)
        if text:
            out.extend((sid, text) for sid in dict.fromkeys(answers) if sid in section_ids)
    return out
