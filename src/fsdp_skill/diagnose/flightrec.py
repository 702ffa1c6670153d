"""Flight-recorder dumps (pickles, loaded without running code, or JSON): every rank's last
collectives with their state and stack."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from fsdp_skill.diagnose import safepickle
from fsdp_skill.diagnose.lines import is_torch_frame
from fsdp_skill.diagnose.report import InputReport
from fsdp_skill.diagnose.trace import (
    Signature,
    Trace,
    Wait,
    normalize_dtype,
    normalize_op,
    normalize_pg,
)

MAX_DUMP = 1 << 30
"""Flight-recorder dumps bigger than this are refused rather than loaded."""


def scan_dump(path: Path, trace: Trace, report: InputReport, rank: int | None) -> None:
    """Read a flight-recorder dump (pickle or JSON) into ``trace``."""
    size = path.stat().st_size
    if size > MAX_DUMP:
        report.problems.append(f"flight-recorder dump of {size} bytes is too big to load")
        return
    data = path.read_bytes()
    try:
        dump = json.loads(data) if data.lstrip()[:1] == b"{" else safepickle.loads_plain(data)
    except (pickle.UnpicklingError, ValueError) as exc:
        report.problems.append(f"not a readable flight-recorder dump: {exc}")
        return
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        report.problems.append("a pickle, but not a flight-recorder dump (no 'entries' list)")
        return
    if isinstance(dump.get("rank"), int):
        rank = dump["rank"]
    if rank is None:
        report.problems.append("no rank in the dump or its file name")
        return
    report.kinds.add("flight-recorder")
    report.ranks.add(rank)
    state = trace.rank(rank)
    waiting: set[str] = set()
    for entry in dump["entries"]:
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        try:
            pg_name = entry.get("process_group") or (str(entry.get("pg_id", "")), "")
            pg = normalize_pg(str(pg_name[0]))
            seq = int(entry["collective_seq_id"])
            numel = sum(_product(s) for s in entry.get("input_sizes") or [])
            dtypes = ",".join(normalize_dtype(str(d)) for d in entry.get("input_dtypes") or [])
            sig = trace.intern(
                Signature(normalize_op(str(entry["profiling_name"])), str(numel), dtypes)
            )
        except (KeyError, TypeError, ValueError):
            report.problems.append("skipped a malformed flight-recorder entry")
            continue
        state.sequence(pg).put(seq, sig)
        # Gloo leaves the state at "scheduled" but retires finished entries.
        pending = entry.get("state") != "completed" and not entry.get("retired")
        if pending and pg not in waiting:
            waiting.add(pg)
            trace.wait(rank, Wait(pg, seq, sig, "flight-recorder", _frame_site(entry)))
    for pg_id, status in (dump.get("pg_status") or {}).items():
        if isinstance(status, dict):
            pg = normalize_pg(str(pg_id))
            state.last_enqueued[pg] = int(status.get("last_enqueued_collective", -1))
            state.last_completed[pg] = int(status.get("last_completed_collective", -1))


def _product(shape) -> int:
    result = 1
    for d in shape:
        result *= int(d)
    return result


def _frame_site(entry: dict) -> str:
    for frame in entry.get("frames") or []:
        if isinstance(frame, dict) and not is_torch_frame(str(frame.get("filename", ""))):
            return f"{Path(str(frame.get('filename'))).name}:{frame.get('line')}"
    return ""
