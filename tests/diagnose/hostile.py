"""Hostile flight-recorder dumps, written opcode by opcode (``pickle.dumps`` cannot make them).

Each pickle is plain data (no global, no call), so only the loader's bounds stand between it
and the analysis.
"""

from __future__ import annotations

import struct


def short_str(text: str) -> bytes:
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data  # SHORT_BINUNICODE


def small_int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)  # BININT


def billion_laughs(size: int = 472, fan_out: int = 10) -> bytes:
    """A dump of ``size`` bytes whose one entry names its collective with a list of
    ``fan_out ** levels`` strings: each level is a list of ``fan_out`` uses of the level below
    (memo gets; each level is memoized, then popped off the stack), so the pickle stays tiny
    while the list, walked, never ends."""
    head = b"\x80\x04"  # PROTO 4
    level_bytes = 1 + 2 * fan_out + 3  # MARK, fan_out BINGETs, LIST, MEMOIZE, POP
    padding = 0
    while True:
        seed = b"\x8c" + bytes([3 + padding]) + b"lol" + b"!" * padding + b"\x940"
        room = size - len(head) - len(seed) - len(_laughs_dump(0))
        levels = room // level_bytes
        if room - levels * level_bytes == 0:
            break
        padding += 1
    body = head + seed
    for level in range(1, levels + 1):
        body += b"(" + (b"h" + bytes([level - 1])) * fan_out + b"l\x940"
    data = body + _laughs_dump(levels)
    assert len(data) == size, len(data)
    return data


def _laughs_dump(level: int) -> bytes:
    """The dump around the laughs: one entry whose profiling_name is memo entry ``level``."""
    return (
        b"}"  # EMPTY_DICT: the dump
        + short_str("entries")
        + b"]"  # EMPTY_LIST
        + b"}("  # the entry, MARK
        + short_str("profiling_name")
        + b"h"
        + bytes([level])  # BINGET: the top level
        + short_str("collective_seq_id")
        + small_int(1)
        + short_str("state")
        + short_str("scheduled")
        + b"u"  # SETITEMS
        + b"a"  # APPEND the entry to entries
        + b"s"  # SETITEM dump["entries"]
        + short_str("rank")
        + small_int(0)
        + b"s."  # SETITEM, STOP
    )


def self_containing_list() -> bytes:
    """A list that holds itself, as the memo allows: ``x = []; x.append(x)``."""
    return b"\x80\x04]\x94h\x00a."


def deep_lists(depth: int) -> bytes:
    """``[[[...]]]`` nested ``depth`` deep (the unpickler builds it without recursion)."""
    return b"\x80\x04" + b"]" * depth + b"a" * (depth - 1) + b"."


def many_gets(count: int) -> bytes:
    """One list holding ``count`` uses of the same small string."""
    return b"\x80\x04" + short_str("x") + b"\x940](" + b"h\x00" * count + b"e."
