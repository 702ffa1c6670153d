"""The end of a log of any size, read as a stream: ``explain``'s input.

A file or a pipe is read to its end in chunks, keeping only its last ``MAX_BYTES`` (where a
failing job prints its errors), cut at a line start; the lines before are counted, not kept,
so line numbers stay those of the whole log, and the caller can say exactly what was cut.
Memory stays under ``MAX_BYTES`` plus one chunk, whatever the input's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

MAX_BYTES = 64 << 20
"""How much of a log ``explain`` reads: its last 64 MiB."""
CHUNK = 4 << 20


@dataclass(frozen=True)
class Tail:
    """The last part of an input, and what came before it."""

    text: str
    total_bytes: int
    skipped_bytes: int
    """Bytes before ``text`` (0 when the whole input is there)."""
    skipped_lines: int
    """Whole lines before ``text``: add it to a line number in ``text``."""

    def place(self, result: dict) -> dict:
        """``explain``'s result with line numbers of the whole input, and (under
        ``truncated``, only when something was) what was not read."""
        for match in result.get("matches", []):
            if isinstance(match.get("line"), int):
                match["line"] += self.skipped_lines
        if self.skipped_bytes:
            result["truncated"] = self.cut()
        return result

    def note(self) -> str | None:
        """One line saying what was not read, for text output; None when all was."""
        if not self.skipped_bytes:
            return None
        return (
            f"note: the input has {self.total_bytes / 2**20:.1f} MiB; explain read its last "
            f"{(self.total_bytes - self.skipped_bytes) / 2**20:.1f} MiB, from line "
            f"{self.skipped_lines + 1} (the first {self.skipped_lines} lines were not read)"
        )

    def cut(self) -> dict | None:
        """What was left out, for a JSON result; None when nothing was."""
        if not self.skipped_bytes:
            return None
        return {
            "total_bytes": self.total_bytes,
            "read_bytes": self.total_bytes - self.skipped_bytes,
            "skipped_bytes": self.skipped_bytes,
            "skipped_lines": self.skipped_lines,
        }


def read_tail(stream: BinaryIO, limit: int = MAX_BYTES) -> Tail:
    """Read ``stream`` to its end; keep its last ``limit`` bytes, from a line start."""
    kept = bytearray()
    total = dropped = lines = 0
    at_line_start = True  # whether the last byte dropped was a newline
    while chunk := stream.read(CHUNK):
        total += len(chunk)
        kept += chunk
        excess = len(kept) - limit
        if excess > 0:
            lines += kept.count(b"\n", 0, excess)
            at_line_start = kept[excess - 1] == ord("\n")
            dropped += excess
            del kept[:excess]
    if not at_line_start:  # the window starts inside a line: leave that line out too
        newline = kept.find(b"\n")
        cut = newline + 1 if newline >= 0 else len(kept)
        lines += newline >= 0
        dropped += cut
        del kept[:cut]
    text = kept.replace(b"\0", b"").decode("utf-8", errors="replace")
    return Tail(text, total, dropped, lines)
