"""The knowledge's texts as the fact tests read them: one line, so a fact may wrap anywhere."""

from __future__ import annotations

import re

from fsdp_skill import knowledge


def flat(text: str | None) -> str:
    """``text`` with every run of whitespace, line breaks included, as one space."""
    return " ".join((text or "").split())


def guide(guide_id: str) -> knowledge.Guide:
    """The guide ``guide_id``; the test fails if there is none."""
    found = next((g for g in knowledge.guides() if g.id == guide_id), None)
    assert found is not None, f"guide {guide_id} is missing"
    return found


def section_text(guide_id: str, title_start: str) -> str:
    """The body of the guide's first ``## `` section whose title starts with ``title_start``."""
    heading = rf"^## {re.escape(title_start)}[^\n]*\n(.*?)(?=^## |\Z)"
    match = re.search(heading, guide(guide_id).body, re.MULTILINE | re.DOTALL)
    assert match, f"{guide_id}: no section titled {title_start!r}..."
    return match.group(1)


def section(guide_id: str, title_start: str) -> str:
    """:func:`section_text`, flat."""
    return flat(section_text(guide_id, title_start))


def _is_rule(cells: list[str]) -> bool:
    return all(cell and set(cell) <= set("-: ") for cell in cells)


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the Markdown tables in ``text`` (headers and rules left
    out; a header is the row above a rule)."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.lstrip().startswith("|")
    ]
    return [
        row
        for i, row in enumerate(rows)
        if not _is_rule(row) and not (i + 1 < len(rows) and _is_rule(rows[i + 1]))
    ]
