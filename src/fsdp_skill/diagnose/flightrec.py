"""Flight-recorder dumps (pickles, loaded without running code, or JSON): every rank's last
collectives with their state and stack.

A dump is checked whole before anything of it enters the trace: every field the analysis
reads must have the type and range the flight recorder writes. A dump that is not a
flight-recorder dump at all becomes one problem for its file; an entry with a bad field is
skipped and counted; the other dumps are read as usual.
"""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsdp_skill.diagnose import safepickle
from fsdp_skill.diagnose.lines import is_torch_frame
from fsdp_skill.diagnose.report import InputReport
from fsdp_skill.diagnose.trace import (
    MAX_RANK,
    MAX_SEQ,
    Signature,
    Trace,
    Wait,
    normalize_dtype,
    normalize_op,
    normalize_pg,
)

MAX_DUMP = 1 << 30
"""Flight-recorder dumps bigger than this are refused rather than loaded."""
MAX_NAME = 1_000
"""Characters of a name (collective, process group, dtype, file) a dump may give."""
MAX_TENSORS = 10_000
MAX_DIMS = 64
MAX_NUMEL = 1 << 63


class BadDump(ValueError):
    """The dump, or one of its entries, is not what the flight recorder writes."""


@dataclass(frozen=True)
class _Entry:
    pg: str
    seq: int
    signature: Signature
    pending: bool
    site: str


def scan_dump(path: Path, trace: Trace, report: InputReport, rank: int | None) -> None:
    """Read a flight-recorder dump (pickle or JSON) into ``trace``."""
    size = path.stat().st_size
    if size > MAX_DUMP:
        report.problems.append(f"flight-recorder dump of {size} bytes is too big to load")
        return
    left_out: list[str] = []  # fields of an otherwise good dump that were not read
    try:
        dump = _decode(path.read_bytes())
        rank = _dump_rank(dump, rank)
        entries, skipped = _entries(dump, left_out)
        status = _pg_status(dump, left_out)
    except BadDump as exc:
        report.problems.append(f"not a readable flight-recorder dump: {exc}")
        return
    if rank is None:
        report.problems.append("no rank in the dump or its file name")
        return
    report.kinds.add("flight-recorder")
    report.ranks.add(rank)
    state = trace.rank(rank)
    waiting: set[str] = set()
    for entry in entries:
        sig = trace.intern(entry.signature)
        if not state.sequence(entry.pg).put(entry.seq, sig):
            skipped.append(f"sequence id {entry.seq} is too far from the others")
            continue
        if entry.pending and entry.pg not in waiting:
            waiting.add(entry.pg)
            trace.wait(rank, Wait(entry.pg, entry.seq, sig, "flight-recorder", entry.site))
    for pg, (enqueued, completed) in status.items():
        state.last_enqueued[pg] = enqueued
        state.last_completed[pg] = completed
    if skipped:
        report.problems.append(
            f"skipped {len(skipped)} malformed flight-recorder entr"
            f"{'y' if len(skipped) == 1 else 'ies'} (first: {skipped[0]})"
        )
    if left_out:
        report.problems.append(
            f"left out {len(left_out)} malformed field(s) (first: {left_out[0]})"
        )


def _decode(data: bytes) -> Any:
    """The dump as plain data: JSON (no NaN or infinities) or a restricted pickle."""
    try:
        if data.lstrip()[:1] == b"{":
            return json.loads(data, parse_constant=_no_constant, parse_float=_finite)
        return safepickle.loads_plain(data)
    except RecursionError:
        raise BadDump("nested too deeply") from None
    except (pickle.UnpicklingError, ValueError, MemoryError) as exc:
        raise BadDump(str(exc) or type(exc).__name__) from None


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a flight recorder writes")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range")
    return value


def _dump_rank(dump: Any, rank: int | None) -> int | None:
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        raise BadDump("no 'entries' list")
    if "rank" in dump and dump["rank"] is not None:
        return _whole(dump["rank"], "rank", MAX_RANK)
    return rank


def _entries(dump: dict, left_out: list[str]) -> tuple[list[_Entry], list[str]]:
    """The dump's collectives (point-to-point ones left out), and why others were skipped."""
    entries, skipped = [], []
    for item in dump["entries"]:
        try:
            entry = _entry(item, left_out)
        except BadDump as exc:
            skipped.append(str(exc))
            continue
        if entry is not None:
            entries.append(entry)
    return entries, skipped


def _entry(item: Any, left_out: list[str]) -> _Entry | None:
    if not isinstance(item, dict):
        raise BadDump(f"an entry is a {type(item).__name__}, not a dict")
    if item.get("is_p2p"):
        return None
    group = item.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        pg_name = _name(group[0], "process_group")
    elif not group:
        pg_name = _name(item.get("pg_id", ""), "pg_id")
    else:
        raise BadDump(f"process_group is {_shown(group)}")
    op = _name(item.get("profiling_name"), "profiling_name")
    sizes = item.get("input_sizes") or []
    dtypes = item.get("input_dtypes") or []
    if not isinstance(sizes, list) or len(sizes) > MAX_TENSORS:
        raise BadDump(f"input_sizes is {_shown(sizes)}")
    if not isinstance(dtypes, list) or len(dtypes) > MAX_TENSORS:
        raise BadDump(f"input_dtypes is {_shown(dtypes)}")
    numel = sum(_numel(shape) for shape in sizes)
    if numel >= MAX_NUMEL:
        raise BadDump(f"input_sizes hold {numel} elements")
    return _Entry(
        pg=normalize_pg(pg_name),
        seq=_whole(item.get("collective_seq_id"), "collective_seq_id", MAX_SEQ),
        signature=Signature(
            normalize_op(op),
            str(numel),
            ",".join(normalize_dtype(_name(d, "input_dtypes")) for d in dtypes),
        ),
        # Gloo leaves the state at "scheduled" but retires finished entries.
        pending=item.get("state") != "completed" and not item.get("retired"),
        site=_frame_site(item.get("frames"), left_out),
    )


def _pg_status(dump: dict, left_out: list[str]) -> dict[str, tuple[int, int]]:
    """``{process group: (last enqueued, last completed)}``; a malformed status is left out."""
    found: dict[str, tuple[int, int]] = {}
    status = dump.get("pg_status")
    if status is None:
        return found
    if not isinstance(status, dict):
        left_out.append(f"pg_status is {_shown(status)}")
        return found
    for pg_id, fields in status.items():
        try:
            if not isinstance(fields, dict):
                raise BadDump(f"pg_status of {_shown(pg_id)} is {_shown(fields)}")
            found[normalize_pg(_name(pg_id, "a pg_status key"))] = (
                _whole(fields.get("last_enqueued_collective", -1), "last_enqueued", MAX_SEQ, -1),
                _whole(fields.get("last_completed_collective", -1), "last_completed", MAX_SEQ, -1),
            )
        except BadDump as exc:
            left_out.append(str(exc))
    return found


def _whole(value: Any, what: str, most: int, least: int = 0) -> int:
    """``value`` as an int in ``[least, most]`` (a digit string is fine; a bool is not)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 30:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise BadDump(f"{what} is {_shown(value)}")
    return value


def _name(value: Any, what: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise BadDump(f"{what} is {_shown(value)}")
    return value


def _numel(shape: Any) -> int:
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise BadDump(f"a tensor shape is {_shown(shape)}")
    result = 1
    for dim in shape:
        result *= _whole(dim, "a tensor dimension", MAX_NUMEL)
    return result


def _shown(value: Any) -> str:
    """What a bad field holds, in a few words (never the whole of it)."""
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _frame_site(frames: Any, left_out: list[str]) -> str:
    """``file.py:line`` of the innermost frame outside torch, if the entry has frames."""
    if frames is None:
        return ""
    if not isinstance(frames, list):
        left_out.append(f"frames is {_shown(frames)}")
        return ""
    for frame in frames:
        filename = frame.get("filename") if isinstance(frame, dict) else None
        line = frame.get("line") if isinstance(frame, dict) else None
        if not isinstance(filename, str) or len(filename) > MAX_NAME:
            left_out.append(f"a frame is {_shown(frame)}")
            return ""
        if not is_torch_frame(filename):
            shown_line = line if isinstance(line, int) and not isinstance(line, bool) else "?"
            return f"{Path(filename).name}:{shown_line}"
    return ""
