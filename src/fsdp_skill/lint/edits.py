"""Text edits of a source file: where an AST node sits in the text, and applying replacements.

The rules whose fix is mechanical return ``Edit`` values (``edit(m, node, source)`` in their
module); ``fixes`` collects and applies them. Positions are character offsets into the source
text (the AST's column offsets are UTF-8 byte offsets, converted here).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` with ``text``; ``description`` says what it fixes."""

    start: int
    end: int
    text: str
    description: str


class Text:
    """A source text with fast (line, byte column) -> character offset conversion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self._starts = [0]
        for line in self.lines:
            self._starts.append(self._starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """The character offset of AST position (1-based line, UTF-8 byte column)."""
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self._starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """(start, end) character offsets of a node."""
        start = self.offset(node.lineno, node.col_offset)
        return start, self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def line_end(self, lineno: int) -> int:
        """The offset just before the line break that ends line ``lineno``."""
        line = self.lines[lineno - 1]
        return self._starts[lineno - 1] + len(line.rstrip("\r\n"))

    def newline(self) -> str:
        """The file's line break (``\\r\\n`` if it uses those, else ``\\n``)."""
        return "\r\n" if self.lines and self.lines[0].endswith("\r\n") else "\n"


def apply(source: str, edits: list[Edit]) -> str | None:
    """``source`` with ``edits`` applied; None if two edits overlap (nothing is applied)."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.end:
            return None
    out = source
    for edit in reversed(ordered):
        out = out[: edit.start] + edit.text + out[edit.end :]
    return out


def string_literal(text: Text, node: ast.Constant, value: str) -> str | None:
    """``node`` (a plain one-piece string literal) rewritten to hold ``value`` in the same
    quotes; None when the literal is not that simple (prefixes, escapes, concatenation) or
    the new value would need escaping."""
    segment = text.segment(node)
    quote = segment[:1]
    if quote not in ("'", '"') or segment[1:3] == quote * 2 or not segment.endswith(quote):
        return None
    inner = segment[1:-1]
    if inner != node.value or "\\" in inner:
        return None  # escapes or an implicit concatenation: not rewritten by hand
    if quote in value or "\\" in value or "\n" in value:
        return None
    return f"{quote}{value}{quote}"
