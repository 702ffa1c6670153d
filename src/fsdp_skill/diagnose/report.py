"""What was read from one input: its kinds, ranks and problems."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InputReport:
    """What was read from one input."""

    path: str
    kinds: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    lines: int = 0
    garbage_bytes: int = 0
    truncated_lines: int = 0
    undecodable_lines: int = 0
    out_of_range_lines: int = 0

    @property
    def kind(self) -> str:
        for kind in (
            "flight-recorder",
            "nccl-coll",
            "nccl-watchdog",
            "c10d-detail",
            "torchrun",
            "rank-log",
        ):
            if kind in self.kinds:
                return kind
        return "unrecognised"

    def as_dict(self) -> dict:
        out = {
            "path": self.path,
            "kind": self.kind,
            "kinds": sorted(self.kinds),
            "ranks": sorted(self.ranks),
        }
        if self.problems:
            out["problems"] = self.problems
        return out


def decode_line(line: bytes, report: InputReport) -> str:
    """A line as text: UTF-8, or Latin-1 (counted) for bytes that are not UTF-8."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        report.undecodable_lines += 1
        return line.decode("latin-1")
