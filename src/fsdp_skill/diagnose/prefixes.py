"""Line prefixes that launchers put in front of each rank's output, and how to read them."""

from __future__ import annotations

import re

# torchrun's exception hook and log prefixes: "[rank3]:", "[default3]:" (role + local rank),
# "[3]:"; a wrapper may add its own "[12345] " before them.
RANK_PREFIX = re.compile(r"^(?:\[\d+\]\s)?\[(rank|[A-Za-z_]*?)(\d+)\]:[ ]?")
RANK_PREFIX_BYTES = re.compile(rb"^(?:\[\d+\]\s)?\[(rank|[A-Za-z_]*?)(\d+)\]:[ ]?")


def split_prefix(line: str) -> tuple[int | None, bool, str]:
    """``(rank, is_global, rest)``: the rank a prefixed line belongs to, and the line without it.

    ``is_global`` is False for role prefixes such as ``[default3]:``, which carry the *local* rank.
    """
    m = RANK_PREFIX.match(line)
    if not m:
        return None, True, line
    return int(m.group(2)), m.group(1) in ("rank", ""), line[m.end() :]


# torchrun's failure summary: "[1]:" opens an entry, "  rank : 3 (local_rank: 3)" names it.
_SUMMARY_ENTRY = re.compile(r"^\[\d+\]:\s*$|^[=-]{10,}\s*$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")


def strip_prefixes(text: str) -> tuple[str, list[int | None]]:
    """The text with every line's rank prefix removed, and each line's rank (or None).

    Lines of an entry in torchrun's failure summary belong to the rank the entry names.
    """
    lines, ranks = [], []
    summary_rank: int | None = None
    for line in text.splitlines():
        rank, _, rest = split_prefix(line)
        if rank is None:
            if _SUMMARY_ENTRY.match(line):
                summary_rank = None
            elif m := _SUMMARY_RANK.match(line):
                summary_rank = int(m.group(1))
            rank = summary_rank
        lines.append(rest)
        ranks.append(rank)
    return "\n".join(lines), ranks
