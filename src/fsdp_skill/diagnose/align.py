"""Aligning the ranks' collectives and finding where they part ways.

Per process group, ranks are grouped by identical sequences; only the distinct sequences are
compared (slice comparisons in C, a binary search for the first difference), so the cost is
linear in the data even for thousands of ranks. At the first sequence number where the ranks
disagree, they split into sides; the majority is the reference and the others are the culprits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fsdp_skill.diagnose.trace import COLL_SUFFIX, DEFAULT_PG, UNKNOWN, Sequence, Trace

ABSENT = -2
"""The rank's log ends before this collective: it never reached it."""
FAILED = -3
"""The rank stopped outside any collective (exception, exit, signal)."""
QUIET = -4
"""The rank reported no collective and no error while the others wait: it is stuck elsewhere."""

MISSING = "missing-collective"
"""The culprits never reached a collective the others are in (exception, exit, branch, stall)."""
EXTRA = "extra-collective"
"""The culprits ran a collective the majority never reached."""
OP_MISMATCH = "op-mismatch"
SIZE_MISMATCH = "size-mismatch"
ALL_WAITING = "all-waiting"
ALONE = "single-rank-waiting"
"""Only one rank's logs, and it waits in a collective: the others' logs are needed."""
NO_DIVERGENCE = "no-divergence"
VERDICTS = (MISSING, EXTRA, OP_MISMATCH, SIZE_MISMATCH, ALL_WAITING, ALONE, NO_DIVERGENCE)


@dataclass
class Side:
    value: int
    ranks: list[int]
    site: str = ""


@dataclass
class Divergence:
    verdict: str
    pg: str | None = None
    seq: int | None = None
    sides: list[Side] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)
    tie: bool = False


def _first_difference(a: Sequence, b: Sequence, start: int = 0) -> int | None:
    """The first sequence number >= ``start`` where ``a`` and ``b`` disagree, or None."""
    a_base, b_base = a.base or 0, b.base or 0
    lo, hi = max(a_base, b_base, start), min(a.end, b.end)
    if lo < hi:
        sa = a.sigs[lo - a_base : hi - a_base]
        sb = b.sigs[lo - b_base : hi - b_base]
        if sa != sb:
            good, bad = 0, len(sa)
            while bad - good > 1:
                mid = (good + bad) // 2
                if sa[good:mid] == sb[good:mid]:
                    good = mid
                else:
                    bad = mid
            return lo + good
    if a.end == b.end:
        return None
    short, long_ = (a, b) if a.end < b.end else (b, a)
    at = max(short.end, long_.base or 0, start)
    return at if at < long_.end else None


def _value_at(seq: Sequence, at: int) -> int | None:
    base = seq.base or 0
    if at >= seq.end:
        return ABSENT
    if at < base:
        return None
    return seq.sigs[at - base]


def _compatible(trace: Trace, a: int, b: int) -> bool:
    """Same collective, as far as both logs tell (one log may omit the size or dtype)."""
    sa, sb = trace.signature(a), trace.signature(b)
    if sa is None or sb is None or sa.op != sb.op:
        return False
    same_numel = not sa.numel or not sb.numel or sa.numel == sb.numel
    return same_numel and (not sa.dtype or not sb.dtype or sa.dtype == sb.dtype)


def _merge_compatible(trace: Trace, by_value: dict[int, list[int]]) -> dict[int, list[int]]:
    """Join sides whose collectives are compatible, under the most detailed signature."""

    def detail(value: int) -> int:
        sig = trace.signature(value) if value >= 0 else None
        return bool(sig and sig.numel) + bool(sig and sig.dtype) if sig else -1

    merged: dict[int, list[int]] = {}
    for value in sorted(by_value, key=detail, reverse=True):
        home = next(
            (k for k in merged if k >= 0 and value >= 0 and _compatible(trace, k, value)), None
        )
        if home is None:
            merged[value] = list(by_value[value])
        else:
            merged[home] = sorted(merged[home] + by_value[value])
    return merged


def _members(trace: Trace, pg: str) -> dict[int, Sequence]:
    members = {r: st.pgs[pg] for r, st in trace.ranks.items() if pg in st.pgs}
    if pg == DEFAULT_PG and _silence_means_absent(trace):
        # The watchdog reports every collective a rank has pending; a rank that reports
        # nothing while the others time out never launched the collective they wait in.
        for rank, state in trace.ranks.items():
            if rank not in members and not state.pgs and not state.waits:
                members[rank] = Sequence()
    return members


def _silence_means_absent(trace: Trace) -> bool:
    return any(w.source == "nccl-watchdog" for st in trace.ranks.values() for w in st.waits)


def _pick_culprits(trace: Trace, sides: list[Side]) -> tuple[list[Side], bool]:
    """The odd sides out: all but the majority. Ties go against failed or absent ranks."""

    def weight(side: Side) -> tuple:
        failed = any(trace.ranks[r].failure for r in side.ranks)
        return (len(side.ranks), not failed, side.value != ABSENT, -min(side.ranks))

    ordered = sorted(sides, key=weight, reverse=True)
    tie = len(ordered) > 1 and len(ordered[0].ranks) == len(ordered[1].ranks)
    return ordered[1:], tie


def _verdict(trace: Trace, reference: Side, odd: list[Side]) -> str:
    if reference.value == ABSENT:
        return EXTRA
    if any(s.value < 0 for s in odd):
        return MISSING
    ref = trace.signature(reference.value)
    for side in odd:
        sig = trace.signature(side.value)
        if ref and sig and ref.op != sig.op:
            return OP_MISMATCH
    return SIZE_MISMATCH


def sequence_divergence(trace: Trace, pg: str) -> Divergence | None:
    members = _members(trace, pg)
    if len(members) < 2 or not any(s.sigs for s in members.values()):
        return None
    groups: dict[tuple, list[int]] = {}
    for rank in sorted(members):
        seq = members[rank]
        groups.setdefault((seq.base or 0, seq.sigs.tobytes()), []).append(rank)
    if len(groups) == 1:
        return None
    ranked = sorted(groups.values(), key=lambda ranks: (-len(ranks), ranks[0]))
    reference = members[ranked[0][0]]
    start = 0
    while True:
        diffs = [_first_difference(reference, members[ranks[0]], start) for ranks in ranked[1:]]
        found = [d for d in diffs if d is not None]
        if not found:
            return None
        at = min(found)
        by_value: dict[int, list[int]] = {}
        for rank, seq in sorted(members.items()):
            value = _value_at(seq, at)
            if value is not None and value != UNKNOWN:
                by_value.setdefault(value, []).append(rank)
        by_value = _merge_compatible(trace, by_value)
        if len(by_value) > 1:
            break
        start = at + 1  # only a gap or a detail one log leaves out differs: look further
    sides = [Side(v, r) for v, r in by_value.items()]
    odd, tie = _pick_culprits(trace, sides)
    reference_side = next(s for s in sides if s not in odd)
    culprits = sorted(r for s in odd for r in s.ranks)
    return Divergence(
        _verdict(trace, reference_side, odd), pg, at, [reference_side, *odd], culprits, tie
    )


def site_divergence(trace: Trace) -> Divergence | None:
    """Without sequence numbers: compare where each rank stopped (collective and call site)."""
    places: dict[tuple, list[int]] = {}
    for rank, state in sorted(trace.ranks.items()):
        wait = next((w for w in state.waits if w.seq is None), None)
        if wait is not None:
            places.setdefault((wait.sig, wait.site), []).append(rank)
        elif state.failure:
            places.setdefault((FAILED, ""), []).append(rank)
    collective_places = [k for k in places if k[0] != FAILED]
    if not collective_places or len(places) < 2:
        return None
    sides = [Side(sig, ranks, site) for (sig, site), ranks in places.items()]
    odd, tie = _pick_culprits(trace, sides)
    reference = next(s for s in sides if s not in odd)
    if reference.value == FAILED:
        return None
    culprits = sorted(r for s in odd for r in s.ranks)
    return Divergence(MISSING, DEFAULT_PG, None, [reference, *odd], culprits, tie)


def failure_divergence(trace: Trace) -> Divergence | None:
    """Some ranks stopped outside any collective while the others carried on: they are the
    ones the others were left waiting for."""
    failed = sorted(r for r, st in trace.ranks.items() if st.failure)
    others = sorted(r for r in trace.ranks if r not in failed)
    if not failed or not others:
        return None
    sides = [Side(UNKNOWN, others), Side(FAILED, failed)]
    return Divergence(MISSING, DEFAULT_PG, None, sides, failed, False)


def _common_wait(trace: Trace, ranks: list[int]) -> tuple[tuple, int, list[int]] | None:
    """The one place (pg, seq, site), collective and ranks where ``ranks`` all wait, if any."""
    places = set()
    by_sig: dict[int, list[int]] = {}
    for rank in ranks:
        wait = trace.ranks[rank].waits[0]
        places.add((wait.pg, wait.seq, wait.site))
        by_sig.setdefault(wait.sig, []).append(rank)
    merged = _merge_compatible(trace, by_sig)
    if len(places) != 1 or len(merged) != 1:
        return None
    ((sig, waiting),) = merged.items()
    return places.pop(), sig, waiting


def quiet_ranks(trace: Trace) -> Divergence | None:
    """All the ranks that say anything wait in one collective, and some ranks say nothing:
    those are stuck outside any collective (a data loader, I/O, a Python loop)."""
    waiting = sorted(r for r, st in trace.ranks.items() if st.waits)
    quiet = sorted(
        r
        for r, st in trace.ranks.items()
        if not st.waits and not st.failure and not any(seq.sigs for seq in st.pgs.values())
    )
    if not waiting or not quiet or any(trace.ranks[r].failure for r in trace.ranks):
        return None
    common = _common_wait(trace, waiting)
    if common is None:
        return None
    (pg, seq, site), sig, ranks = common
    sides = [Side(sig, ranks, site), Side(QUIET, quiet)]
    return Divergence(MISSING, pg, seq, sides, quiet, len(quiet) == len(ranks))


def all_waiting(trace: Trace) -> Divergence | None:
    """Every rank with a known position waits in the same collective, and none failed."""
    if any(st.failure for st in trace.ranks.values()):
        return None
    waiting = sorted(r for r, st in trace.ranks.items() if st.waits)
    if not waiting:
        return _last_common_collective(trace)
    common = _common_wait(trace, waiting)
    if common is None:
        return None
    (pg, seq, site), sig, ranks = common
    verdict = ALONE if len(trace.ranks) == 1 else ALL_WAITING
    if len(ranks) < 2 and verdict == ALL_WAITING:
        return None
    return Divergence(verdict, pg, seq, [Side(sig, ranks, site)], [], False)


def _last_common_collective(trace: Trace) -> Divergence | None:
    """NCCL COLL logs say what was launched, not what finished: if the ranks agree all the way,
    a hung job is stuck in the last collective they all launched. (Flight-recorder dumps say
    what finished; there, no pending entry means nobody waits.)"""
    pgs = sorted(
        {pg for st in trace.ranks.values() for pg in st.pgs if pg.endswith(COLL_SUFFIX)},
        key=lambda p: p != DEFAULT_PG + COLL_SUFFIX,
    )
    for pg in pgs:
        members = {r: st.pgs[pg] for r, st in trace.ranks.items() if pg in st.pgs}
        if len(members) < 2:
            continue
        last = min(seq.end for seq in members.values()) - 1
        first = next(iter(members.values()))
        if last < (first.base or 0):
            continue
        sig = _value_at(first, last)
        return Divergence(ALL_WAITING, pg, last, [Side(sig or UNKNOWN, sorted(members))], [], False)
    return None


def diverge(trace: Trace) -> tuple[Divergence, list[Divergence]]:
    """The verdict's divergence, and divergences found in other process groups."""
    pgs = sorted(
        {pg for st in trace.ranks.values() for pg in st.pgs}, key=lambda p: (p != DEFAULT_PG, p)
    )
    found = [d for d in (sequence_divergence(trace, pg) for pg in pgs) if d is not None]
    if found:
        return found[0], found[1:]
    for check in (site_divergence, failure_divergence, quiet_ranks, all_waiting):
        result = check(trace)
        if result is not None:
            return result, []
    return Divergence(NO_DIVERGENCE), []
