"""HTML tables as Markdown tables: spanning cells expanded so each sits under its header.

Markdown tables have one header row and no spans. A cell spanning ``n`` columns or rows is
repeated in each slot it covers, and stacked header rows are merged column by column, so
the Backends table of the distributed docs (``gloo`` over ``CPU`` and ``GPU``) becomes the
columns ``gloo CPU | gloo GPU``.
"""

from __future__ import annotations

from collections.abc import Callable

from fsdp_skill.references.html_tree import Node, walk

MAX_SPAN = 100
"""Spans are capped: a hostile ``colspan="100000"`` must not build a huge table."""


def _span(cell: Node, name: str) -> int:
    value = cell.attrs.get(name, "1").strip()
    return max(1, min(int(value), MAX_SPAN)) if value.isdigit() else 1


def _rows(table: Node) -> list[tuple[Node, list[Node]]]:
    """(row, its cells) for the rows of ``table``, not those of tables nested in it."""
    rows = []
    for node in walk(table):
        if node.tag != "tr" or _owner(node) is not table:
            continue
        cells = [c for c in node.elements() if c.tag in ("td", "th")]
        if cells:
            rows.append((node, cells))
    return rows


def _owner(row: Node) -> Node | None:
    node = row.parent
    while node is not None and node.tag != "table":
        node = node.parent
    return node


def _is_header(row: Node, cells: list[Node]) -> bool:
    in_head = row.parent is not None and row.parent.tag == "thead"
    return in_head or all(c.tag == "th" for c in cells)


def grid(table: Node, render: Callable[[Node], str]) -> tuple[list[str], list[list[str]]]:
    """(header, body rows) of ``table`` with every span expanded; cells through ``render``."""
    rows = _rows(table)
    filled: dict[tuple[int, int], str] = {}
    for r, (_, cells) in enumerate(rows):
        c = 0
        for cell in cells:
            while (r, c) in filled:
                c += 1
            text = render(cell)
            for dr in range(_span(cell, "rowspan")):
                for dc in range(_span(cell, "colspan")):
                    filled[(r + dr, c + dc)] = text
            c += _span(cell, "colspan")
    if not rows:
        return [], []
    width = max(c for _, c in filled) + 1
    matrix = [[filled.get((r, c), "") for c in range(width)] for r in range(len(rows))]
    head_count = 0
    while head_count < len(rows) - 1 and _is_header(*rows[head_count]):
        head_count += 1
    if head_count == 0:
        return matrix[0], matrix[1:]
    header = []
    for c in range(width):
        parts: list[str] = []
        for r in range(head_count):
            if matrix[r][c] and (not parts or parts[-1] != matrix[r][c]):
                parts.append(matrix[r][c])
        header.append(" ".join(parts))
    return header, matrix[head_count:]


def markdown_table(table: Node, render: Callable[[Node], str]) -> list[str]:
    """The Markdown lines of ``table`` (none when it has no cells)."""
    header, body = grid(table, lambda cell: render(cell).replace("|", "\\|"))
    if not header:
        return []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines
