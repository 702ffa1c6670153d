"""What the logs say each rank did: its collectives per process group, where it waits, how it died.

Collective signatures are interned to small integers so that one rank's sequence in one
process group is a compact ``array('i')`` (memory grows linearly with ranks x collectives),
and ranks are compared with slice comparisons that run in C.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field

UNKNOWN = -1
"""Signature id of a collective whose details were not logged (a gap in the sequence)."""
MAX_RANK = (1 << 24) - 1
"""The highest rank a log or dump may name (more ranks than any job has)."""
MAX_SEQ = (1 << 63) - 1
"""The highest sequence number a log or dump may give (torch counts in 64 bits)."""
MAX_GAP = 1 << 24
"""Collectives a sequence may skip between two it knows (the gap is stored, as UNKNOWN)."""

DEFAULT_PG = "default"
DETAIL_SUFFIX = " [DETAIL]"
COLL_SUFFIX = " [NCCL COLL]"
"""Sources that number collectives their own way keep their own process-group keys, so their
sequence numbers are never compared with the process group's (watchdog, flight recorder)."""

_OP_ALIASES = {
    "ALLGATHERINTOTENSOR": "ALLGATHER",
    "ALLGATHERBASE": "ALLGATHER",
    "ALLGATHERINTOTENSORCOALESCED": "ALLGATHER",
    "REDUCESCATTERTENSOR": "REDUCESCATTER",
    "REDUCESCATTERBASE": "REDUCESCATTER",
    "REDUCESCATTERTENSORCOALESCED": "REDUCESCATTER",
    "ALLREDUCECOALESCED": "ALLREDUCE",
    "BROADCASTCOALESCED": "BROADCAST",
    "ALLTOALLSINGLE": "ALLTOALL",
    "ALLTOALLBASE": "ALLTOALL",
    "MONITOREDBARRIER": "BARRIER",
}

# NCCL's ncclDataType_t values as printed in NCCL_DEBUG=INFO COLL lines.
NCCL_DTYPES = {
    "0": "int8",
    "1": "uint8",
    "2": "int32",
    "3": "uint32",
    "4": "int64",
    "5": "uint64",
    "6": "float16",
    "7": "float32",
    "8": "float64",
    "9": "bfloat16",
}
# c10 scalar type names as printed by torch (fingerprints, flight recorder).
TORCH_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
}


def normalize_op(name: str) -> str:
    """One spelling per collective: ``all_reduce``, ``AllReduce``, ``ALLREDUCE`` -> ``ALLREDUCE``."""
    key = re.sub(r"[^A-Z]", "", name.rsplit(":", 1)[-1].upper())
    return _OP_ALIASES.get(key, key)


def normalize_dtype(name: str) -> str:
    return TORCH_DTYPES.get(name, name.lower())


def normalize_pg(name: str) -> str:
    return DEFAULT_PG if name in ("", "0", "default_pg", DEFAULT_PG) else name


@dataclass(frozen=True)
class Signature:
    op: str
    numel: str = ""
    dtype: str = ""

    def describe(self) -> str:
        parts = [self.op]
        if self.numel:
            parts.append(f"numel={self.numel}")
        if self.dtype:
            parts.append(f"dtype={self.dtype}")
        return " ".join(parts)


class Sequence:
    """One rank's collectives in one process group: signature ids from sequence number ``base``."""

    __slots__ = ("base", "sigs")

    def __init__(self) -> None:
        self.base: int | None = None
        self.sigs = array("i")

    @property
    def end(self) -> int:
        return (self.base or 0) + len(self.sigs)

    def put(self, seq: int, sig: int) -> bool:
        """Record collective ``seq``; gaps become UNKNOWN, known entries are kept.

        False (nothing recorded) when ``seq`` is negative or more than ``MAX_GAP`` away from
        the collectives already known: no input can make the sequence take unbounded memory.
        """
        if not 0 <= seq <= MAX_SEQ or (
            self.base is not None and not self.base - MAX_GAP <= seq <= self.end + MAX_GAP
        ):
            return False
        if self.base is None:
            self.base = seq
        if seq < self.base:
            self.sigs[0:0] = array("i", [UNKNOWN] * (self.base - seq))
            self.base = seq
        index = seq - self.base
        if index >= len(self.sigs):
            self.sigs.extend([UNKNOWN] * (index - len(self.sigs)))
            self.sigs.append(sig)
        elif self.sigs[index] == UNKNOWN:
            self.sigs[index] = sig
        return True

    def extend(self, base: int, sigs: array) -> None:
        """Append a contiguous run of collectives starting at ``base``."""
        if self.base is None:
            self.base = base
        if base == self.end:
            self.sigs.extend(sigs)
        else:
            for offset, sig in enumerate(sigs):
                self.put(base + offset, sig)


@dataclass
class Wait:
    """A collective a rank was blocked in when the log ends (timeout, mismatch report, dump)."""

    pg: str
    seq: int | None
    sig: int
    source: str
    site: str = ""


@dataclass
class RankState:
    pgs: dict[str, Sequence] = field(default_factory=dict)
    waits: list[Wait] = field(default_factory=list)
    failure: str = ""
    """Why the rank stopped outside any collective (an exception, an exit code, a signal)."""
    error: str = ""
    """The last error the rank reported from inside a collective."""
    last_enqueued: dict[str, int] = field(default_factory=dict)
    last_completed: dict[str, int] = field(default_factory=dict)

    def sequence(self, pg: str) -> Sequence:
        seq = self.pgs.get(pg)
        if seq is None:
            seq = self.pgs[pg] = Sequence()
        return seq


class Trace:
    """Everything read from all inputs, per global rank."""

    def __init__(self) -> None:
        self.ranks: dict[int, RankState] = {}
        self.signatures: list[Signature] = []
        self._ids: dict[Signature, int] = {}
        self.world_size: int | None = None
        self.local_rank_prefixes = False

    def rank(self, rank: int) -> RankState:
        """The state of ``rank``; ValueError when no job could have that rank."""
        state = self.ranks.get(rank)
        if state is None:
            if not 0 <= rank <= MAX_RANK:
                raise ValueError(f"rank {rank} is out of range")
            state = self.ranks[rank] = RankState()
        return state

    def intern(self, sig: Signature) -> int:
        found = self._ids.get(sig)
        if found is None:
            found = self._ids[sig] = len(self.signatures)
            self.signatures.append(sig)
        return found

    def signature(self, sig_id: int) -> Signature | None:
        return None if sig_id == UNKNOWN else self.signatures[sig_id]

    def wait(self, rank: int, wait: Wait) -> None:
        """Record where ``rank`` is blocked; a known sequence number also enters its sequence."""
        state = self.rank(rank)
        if any(w.pg == wait.pg and w.seq == wait.seq and w.sig == wait.sig for w in state.waits):
            return
        state.waits.append(wait)
        if wait.seq is not None:
            state.sequence(wait.pg).put(wait.seq, wait.sig)

    def has_sequences(self) -> bool:
        return any(s.sigs for st in self.ranks.values() for s in st.pgs.values())

    def merge(self, other: Trace) -> None:
        """Add everything ``other`` (read from other files) knows to this trace."""
        translate = [self.intern(sig) for sig in other.signatures]
        translate.append(UNKNOWN)  # index -1: UNKNOWN stays UNKNOWN
        for rank, theirs in other.ranks.items():
            mine = self.rank(rank)
            for pg, seq in theirs.pgs.items():
                if seq.base is not None:
                    sigs = array("i", map(translate.__getitem__, seq.sigs))
                    mine.sequence(pg).extend(seq.base, sigs)
            for w in theirs.waits:
                self.wait(rank, Wait(w.pg, w.seq, translate[w.sig], w.source, w.site))
            mine.failure = mine.failure or theirs.failure
            mine.error = mine.error or theirs.error
            mine.last_enqueued.update(theirs.last_enqueued)
            mine.last_completed.update(theirs.last_completed)
        if other.world_size:
            self.world_size = max(self.world_size or 0, other.world_size)
        self.local_rank_prefixes |= other.local_rank_prefixes
