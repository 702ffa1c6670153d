"""One view of an error text that survives how people copy, wrap and decorate it.

Signatures are matched against a normalised copy of the text: launcher prefixes (``[rank3]:``,
``(WorkerDict pid=12) ``, ``> `` of a quoted reply) and ANSI colours are removed, backticks and
quotes are dropped (torch quotes names in some versions and not in others, and people strip
them), runs of blanks become one space, and rich-traceback frames (``│ … │``) lose their
borders. Lines are joined by a newline in one view and by a space in the other, so a message
wrapped across lines still matches; both views have the same length, so an offset in either
names the same line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from fsdp_skill.diagnose.prefixes import strip_prefixes

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]")
QUOTES = re.compile(r"\\{0,4}[`'\"\u2018\u2019\u201c\u201d]")
"""The quotes and backticks matching drops (an escaping backslash included)."""
# "(WorkerDict pid=9092) ", "> " (a quoted reply), rich-traceback borders.
_LEAD = re.compile(r"^\s{0,40}(?:(?:>|\u2502|\u2503|\|)(?=\s)|\([A-Za-z_]\w{0,60} pid=\d{1,10}\))")
_TRAIL = re.compile(r"\s(?:\u2502|\u2503)\s{0,40}$")
_MAX_LAYERS = 8
"""Decorations removed from one end of a line at most (a quoted reply of a rich traceback…)."""


def strip_decorations(line: str) -> str:
    """One line without colours, wrapper prefixes, box borders and surrounding blanks."""
    line = _ANSI.sub("", line)
    for pattern in (_LEAD, _TRAIL):
        for _ in range(_MAX_LAYERS):
            cut = pattern.sub("", line, count=1)
            if cut == line:
                break
            line = cut
    return line.strip()


_DECORATED = (">", "\u2502", "\u2503", "|", "(")
_BLANKS_IN_LINE = re.compile(r"[^\S\n]+")


def _undecorated(line: str) -> str:
    """``strip_decorations`` for the lines that can carry one; the others are only stripped."""
    bare = line.strip()
    if bare.startswith(_DECORATED) or bare.endswith(("\u2502", "\u2503")):
        return strip_decorations(bare)
    return bare


@dataclass(frozen=True)
class Normalized:
    """An error text in the forms matching needs."""

    lines: list[str]
    """The original lines without rank prefixes: what a match shows."""
    ranks: list[int | None]
    """The rank that printed each line, where a prefix or torchrun's summary says."""
    by_line: str
    """Normalised lines joined by newlines (for signatures anchored with ``^`` or ``$``)."""
    joined: str
    """The same, joined by spaces: a message wrapped across lines reads as one."""
    lowered: str
    """``joined`` in lower case, for the literal pre-filter."""
    starts: list[int]

    def line_at(self, offset: int) -> int:
        """The index of the line holding ``offset`` of either view."""
        return bisect_right(self.starts, offset) - 1


def normalize(text: str) -> Normalized:
    """The views of ``text`` that signatures are matched against."""
    clean, ranks = strip_prefixes(_ANSI.sub("", text))
    lines = clean.split("\n") if clean else []
    normal = [_undecorated(line) for line in lines]
    # Quotes and blank runs go in one pass over the whole text (lines keep their count).
    normal = _BLANKS_IN_LINE.sub(" ", QUOTES.sub("", "\n".join(normal))).split("\n")
    normal = [line.strip() for line in normal]
    starts, pos = [], 0
    for line in normal:
        starts.append(pos)
        pos += len(line) + 1
    by_line = "\n".join(normal)
    joined = " ".join(normal)
    return Normalized(lines, ranks, by_line, joined, joined.lower(), starts)
