"""``hang``: read every rank's logs or dumps, align their collectives, say where they diverged."""

from __future__ import annotations

from itertools import islice

from fsdp_skill.diagnose import advice, align
from fsdp_skill.diagnose.scan import scan_all, scan_string
from fsdp_skill.diagnose.sources import expand
from fsdp_skill.diagnose.trace import MAX_RANK, UNKNOWN, Trace
from fsdp_skill.errors import UsageError
from fsdp_skill.roots import Roots

_EXPLAIN = {
    align.MISSING: "some ranks never reached a collective the others are in",
    align.EXTRA: "some ranks ran a collective the others never reached",
    align.OP_MISMATCH: "the ranks called different collectives at the same point",
    align.SIZE_MISMATCH: "the ranks called the same collective with different sizes or dtypes",
    align.ALL_WAITING: "all ranks wait in the same collective",
    align.ALONE: "the only rank in these logs waits in a collective: the other ranks' logs "
    "are needed to tell which of them is missing",
    align.NO_DIVERGENCE: "no divergence found between the ranks",
}


def _describe(trace: Trace, side: align.Side) -> str:
    if side.value == align.ABSENT:
        return "never reached it (log ends earlier)"
    if side.value == align.FAILED:
        return "stopped outside any collective"
    if side.value == align.QUIET:
        return (
            "no collective error and no collective in progress: stuck outside any collective "
            "(data loading, I/O, a Python loop) or killed silently"
        )
    if side.value == UNKNOWN:
        return "no sign of a problem in what they logged"
    sig = trace.signature(side.value)
    text = sig.describe() if sig else "a collective whose details were not logged"
    return text + (f" at {side.site}" if side.site else "")


def _side_dict(trace: Trace, side: align.Side) -> dict:
    out: dict = {"ranks": side.ranks, "state": _describe(trace, side)}
    failures = {r: trace.ranks[r].failure for r in side.ranks if trace.ranks[r].failure}
    if failures:
        out["failures"] = {str(r): f for r, f in failures.items()}
    return out


def _divergence_dict(trace: Trace, d: align.Divergence) -> dict:
    if not d.sides:
        return {}
    reference = d.sides[0]
    sig = trace.signature(reference.value) if reference.value >= 0 else None
    if sig is None:
        sig = next(
            (
                trace.signature(s.value)
                for s in d.sides
                if s.value >= 0 and trace.signature(s.value)
            ),
            None,
        )
    out = {
        "process_group": d.pg,
        "seq": d.seq,
        "op": sig.op if sig else None,
        "numel": sig.numel if sig else None,
        "dtype": sig.dtype if sig else None,
        "majority": _side_dict(trace, reference),
        "others": [_side_dict(trace, s) for s in d.sides[1:]],
    }
    if d.tie:
        out["tie"] = True
    if d.verdict == align.ALONE:
        state = trace.ranks[reference.ranks[0]]
        pg = d.pg or ""
        for key, values in (
            ("last_completed", state.last_completed),
            ("last_enqueued", state.last_enqueued),
        ):
            found = values.get(pg, values.get(pg.split("[")[0])) if values else None
            if found is None and len(values) == 1:
                found = next(iter(values.values()))
            if found is not None:
                out[key] = found
    return out


def _rank_summary(trace: Trace) -> dict:
    out = {}
    for rank, state in sorted(trace.ranks.items()):
        entry: dict = {
            "collectives": {pg: len(seq.sigs) for pg, seq in state.pgs.items() if seq.sigs}
        }
        if state.waits:
            w = state.waits[0]
            sig = trace.signature(w.sig)
            entry["waiting_in"] = {
                "process_group": w.pg,
                "seq": w.seq,
                "op": sig.op if sig else None,
                "source": w.source,
                **({"site": w.site} if w.site else {}),
            }
        if state.failure:
            entry["failure"] = state.failure
        if state.error:
            entry["error"] = state.error
        if state.last_completed:
            entry["last_completed"] = state.last_completed
            entry["last_enqueued"] = state.last_enqueued
        out[str(rank)] = entry
    return out


def hang(paths: list[str], roots: Roots | None = None) -> dict:
    """Analyse the inputs (only those inside ``roots``, if given); raise UsageError if
    nothing in them could be read."""
    files, problems = expand(paths, roots)
    trace, reports = scan_all(files)
    if not trace.ranks:
        details = problems + [f"{r.path}: {'; '.join(r.problems)}" for r in reports if r.problems]
        raise UsageError(
            "nothing to analyse: no rank's collectives, timeouts or errors were found"
            + (
                f" ({details[0]}{'' if len(details) == 1 else f'; and {len(details) - 1} more'})"
                if details
                else ""
            )
        )
    return _result(trace, reports, problems)


def analyse_text(text: str) -> dict | None:
    """``hang``'s answer for one pasted log, when it holds at least two ranks' collectives.

    ``explain`` adds this to its answer: the same divergence check, without files.
    """
    trace, report = scan_string(text)
    informed = [
        r for r, st in trace.ranks.items() if st.waits or any(seq.sigs for seq in st.pgs.values())
    ]
    if len(informed) < 2:
        return None
    result = _result(trace, [report], [])
    for key in ("inputs", "rank_states", "other_divergences"):
        result.pop(key, None)
    return result


def _result(trace: Trace, reports: list, problems: list[str]) -> dict:
    divergence, others = align.diverge(trace)
    kinds = {k for r in reports for k in r.kinds}
    warnings = list(problems)
    for r in reports:
        warnings += [f"{r.path}: {p}" for p in r.problems]
    if len(trace.ranks) == 1:
        warnings.append("only one rank's logs were given: there is nothing to compare it with")
    if trace.world_size and len(trace.ranks) < trace.world_size <= MAX_RANK + 1:
        absent = (r for r in range(trace.world_size) if r not in trace.ranks)
        missing = list(islice(absent, 21))
        shown = ", ".join(map(str, missing[:20])) + (" …" if len(missing) > 20 else "")
        warnings.append(f"world size is {trace.world_size} but there are no logs for ranks {shown}")
    if trace.local_rank_prefixes:
        warnings.append(
            "some ranks are local ranks (a role prefix such as [default3]:, or torchrun's "
            "--log-dir folders): with several nodes, analyse each node's output separately or "
            "use global-rank prefixes"
        )
    return {
        "ranks": len(trace.ranks),
        "verdict": divergence.verdict,
        "summary": _EXPLAIN[divergence.verdict],
        "culprit_ranks": divergence.culprits,
        "first_divergence": _divergence_dict(trace, divergence),
        "other_divergences": [_divergence_dict(trace, d) for d in others],
        "advice": advice.ADVICE[divergence.verdict],
        "pitfalls": advice.pitfalls_for(divergence.verdict),
        "next_run_env": advice.next_run_env(kinds),
        "rank_states": _rank_summary(trace),
        "inputs": [r.as_dict() for r in reports],
        "warnings": warnings,
    }
