"""The knowledge's texts as the fact tests read them: one line, so a fact may wrap anywhere."""

from __future__ import annotations

from fsdp_skill import knowledge


def flat(text: str | None) -> str:
    """``text`` with every run of whitespace, line breaks included, as one space."""
    return " ".join((text or "").split())


def guide(guide_id: str) -> knowledge.Guide:
    """The guide ``guide_id``; the test fails if there is none."""
    found = next((g for g in knowledge.guides() if g.id == guide_id), None)
    assert found is not None, f"guide {guide_id} is missing"
    return found


def section(guide_id: str, title_start: str) -> str:
    """The flat text of the guide's ``## `` section whose title starts with ``title_start``."""
    body = guide(guide_id).body
    for part in body.split("\n## ")[1:]:
        if part.startswith(title_start):
            return flat(part)
    raise AssertionError(f"{guide_id}: no section titled {title_start!r}...")
