"""Reading one input into the trace: streamed text logs of every kind, and flight-recorder dumps.

Text is read in chunks of bytes; nothing holds a whole file. Collective lines of
``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` logs (by far the most numerous) are matched per
chunk in bulk and interned without a Python loop per line; every other kind of line is found
by a keyword pre-filter and parsed one by one.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import count
from operator import itemgetter
from pathlib import Path

from fsdp_skill.diagnose import safepickle
from fsdp_skill.diagnose.prefixes import split_prefix
from fsdp_skill.diagnose.sources import rank_from_path
from fsdp_skill.diagnose.trace import (
    COLL_SUFFIX,
    DEFAULT_PG,
    DETAIL_SUFFIX,
    NCCL_DTYPES,
    Signature,
    Trace,
    Wait,
    normalize_dtype,
    normalize_op,
    normalize_pg,
)

CHUNK = 4 << 20
MAX_LINE = 1 << 20
"""A line longer than this is cut: logs are lines, a megabyte without a newline is not one."""
MAX_DUMP = 1 << 30
"""Flight-recorder dumps bigger than this are refused rather than loaded."""

# --- NCCL_DEBUG=INFO -----------------------------------------------------------------------
# The groups of _COLL are exactly a collective's key (op, count, datatype, comm), so rows
# intern without building new tuples. Point-to-point lines ("recvbuff (nil)") do not match:
# sends and receives legitimately differ between ranks.
_COLL = re.compile(
    rb" NCCL INFO (\w+): opCount \w+ sendbuff \w+ recvbuff \w+ count (\d+) "
    rb"datatype (\d+) op \d+ root \d+ comm (\w+)"
)
_COLL_SEQ = re.compile(
    rb"([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO (\w+): opCount ([0-9a-fA-F]+) sendbuff \w+ "
    rb"recvbuff \w+ count (\d+) datatype (\d+) op \d+ root \d+ comm (\w+)"
)
_OPCOUNT = re.compile(rb" NCCL INFO \w+: opCount ([0-9a-fA-F]+) sendbuff \w+ recvbuff \w+ ")
_PROC = re.compile(rb"([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO \w+: opCount")
_INIT = re.compile(
    r"([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO (?:\w+ )?comm (0x[0-9a-fA-F]+) rank (\d+) "
    r"nranks (\d+)(?:.*?commId (0x[0-9a-fA-F]+))?.*?- Init (?:START|COMPLETE)"
)
# --- ProcessGroupNCCL watchdog ------------------------------------------------------------
_PG_RANK = r"\[(?:PG ID (\d+) PG GUID (\S+?)(?:\(\w+\))? )?(?:PG (\d+) )?Rank (\d+)\]"
_WATCHDOG = re.compile(
    _PG_RANK + r" Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), "
    r"OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?"
)
_WORK_STATUS = re.compile(
    _PG_RANK + r" (?:Exception \(either an error or timeout\) detected by watchdog at work|"
    r"Timeout at NCCL work): (\d+), last enqueued NCCL work: (-?\d+), "
    r"last completed NCCL work: (-?\d+)"
)
# --- TORCH_DISTRIBUTED_DEBUG=DETAIL -------------------------------------------------------
_FINGERPRINT = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+),?\s*"
    r"OpType=(\w+)(?:, TensorShape=\[([^\]]*)\], TensorDtypes=(\w+))?"
)
# --- Python tracebacks and torchrun's failure summary ----------------------------------------
_TB_START = re.compile(r"^\s*Traceback \(most recent call last\)")
_FRAME = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?::\s?(.*))?$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)[^(]*(?:\(pid: \d+\))?\s*(?:\((SIG\w+)\))?")

_NCCL_INFO = b" NCCL INFO "
_KEYWORDS = (
    b"Watchdog caught",
    b"NCCL work:",
    b"CollectiveFingerPrint",
    b"Traceback (most recent call last)",
    b'File "',
    b"Error",
    b"Exception",
    b"Interrupt",
    b"Exit",
    b"exitcode",
    b"(local_rank:",
)
"""Every line that can carry a fact contains one of these; other lines are never decoded."""

COLLECTIVE_FUNCS = frozenset(
    "all_reduce all_gather all_gather_into_tensor all_gather_object all_gather_coalesced "
    "all_reduce_coalesced all_to_all all_to_all_single barrier monitored_barrier broadcast "
    "broadcast_object_list gather gather_object reduce reduce_scatter reduce_scatter_tensor "
    "scatter scatter_object_list send recv isend irecv batch_isend_irecv _all_gather_base "
    "_reduce_scatter_base".split()
)
_LAUNCHER_ERRORS = ("ChildFailedError", "SignalException")


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


def _decode(line: bytes, report: InputReport) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        report.undecodable_lines += 1
        return line.decode("latin-1")


@dataclass
class _CollRun:
    """One process's collectives on one communicator, as read so far from one file.

    ``seqs`` stays None while the opCounts run contiguously from ``first``; once a line is
    lost or out of order, it holds every collective's own opCount.
    """

    first: int
    last: int
    ids: array = field(default_factory=lambda: array("i"))
    seqs: array | None = None


class _TextScanner:
    """Turns the lines of one text input into trace facts."""

    def __init__(self, trace: Trace, report: InputReport, file_rank: int | None, file_global: bool):
        self.trace = trace
        self.report = report
        self.file_rank = file_rank
        self.file_global = file_global
        self.tracebacks: dict[int, list[tuple[str, int, str]]] = {}
        self.summary_rank: int | None = None
        self.inits: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)
        self.claims: list[tuple[int, int, int]] = []
        self.local_ids: defaultdict = defaultdict(count().__next__)
        self.runs: dict[tuple[str, str], _CollRun] = {}
        self.comm_order: dict[str, list[str]] = defaultdict(list)
        self.gaps = False

    # -- collective lines, in bulk ---------------------------------------------------------
    def coll_chunk(self, body: bytes) -> None:
        procs = set(_PROC.findall(body, 0, 1 << 16))
        if len(procs) <= 1:
            rows = _COLL.findall(body)
            if not rows:
                return
            first, last = _first_and_last_opcount(body)
            if len(set(map(itemgetter(3), rows))) == 1 and last - first + 1 == len(rows):
                # One process, one communicator, no line lost: numbered from the first line.
                ids = array("i", map(self.local_ids.__getitem__, rows))
                proc = procs.pop().decode("latin-1") if procs else ""
                self._add_run(proc, rows[0][3], first, ids)
                return
        per_key: dict[tuple[bytes, bytes], tuple[array, array]] = {}
        for proc_b, op, opcount, cnt, dtype, comm in _COLL_SEQ.findall(body):
            seqs, ids = per_key.setdefault((proc_b, comm), (array("q"), array("i")))
            seqs.append(int(opcount, 16))
            ids.append(self.local_ids[(op, cnt, dtype, comm)])
        for (proc_b, comm), (seqs, ids) in per_key.items():
            self._add_run(proc_b.decode("latin-1"), comm, seqs[0], ids, seqs)

    def _add_run(
        self, proc: str, comm: bytes, first: int, ids: array, seqs: array | None = None
    ) -> None:
        self.report.kinds.add("nccl-coll")
        key = (proc, comm.decode("latin-1"))
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _CollRun(first, first - 1)
            self.comm_order[proc].append(key[1])
        contiguous = seqs is None or list(seqs) == list(range(first, first + len(seqs)))
        if run.seqs is None and not (contiguous and first == run.last + 1):
            self.gaps = True
            run.seqs = array("q", range(run.first, run.last + 1))
        if run.seqs is not None:
            run.seqs.extend(seqs if seqs is not None else range(first, first + len(ids)))
        run.ids.extend(ids)
        run.last = first + len(ids) - 1 if seqs is None else seqs[-1]

    def finish_coll(self) -> None:
        """Map processes and communicators to global ranks and process groups."""
        if not self.runs:
            return
        if self.gaps:
            self.report.problems.append(
                "NCCL opCount values are not contiguous (lines lost or reordered): "
                "each collective is placed by its opCount, gaps are compared as unknown"
            )
        by_local = {v: k for k, v in self.local_ids.items()}
        translate = [
            self.trace.intern(
                Signature(
                    normalize_op(op.decode()),
                    cnt.decode(),
                    NCCL_DTYPES.get(dtype.decode(), dtype.decode()),
                )
            )
            for op, cnt, dtype, _ in (by_local[i] for i in range(len(by_local)))
        ]
        procs = {proc for proc, _ in self.runs}
        for (proc, comm), run in self.runs.items():
            rank, pg = self._resolve(proc, comm, len(procs))
            if rank is None:
                self.report.problems.append(
                    f"NCCL lines of process {proc or '?'} could not be tied to a rank "
                    "(no 'Init COMPLETE' line and no rank in the file name)"
                )
                continue
            ids = array("i", map(translate.__getitem__, run.ids))
            sequence = self.trace.rank(rank).sequence(pg)
            if run.seqs is None:
                sequence.extend(run.first, ids)
            else:
                for seq, sig in zip(run.seqs, ids, strict=True):
                    sequence.put(seq, sig)
            self.report.ranks.add(rank)

    def _resolve(self, proc: str, comm: str, nprocs: int) -> tuple[int | None, str]:
        inits = self.inits.get(proc) or []
        if not inits and nprocs == 1 and len(self.inits) == 1:
            inits = next(iter(self.inits.values()))
        rank = self.file_rank if nprocs == 1 and self.file_global else None
        if inits and rank is None:
            world = max(inits, key=lambda i: i[2])
            rank = world[1]
            self.trace.world_size = max(self.trace.world_size or 0, world[2])
        pg = None
        for index, (ptr, _, nranks, comm_id) in enumerate(inits):
            if ptr == comm:
                pg = DEFAULT_PG if index == 0 else f"nccl:{comm_id or f'{nranks}-ranks#{index}'}"
        if pg is None:
            order = self.comm_order[proc].index(comm)
            pg = DEFAULT_PG if order == 0 else f"comm#{order}"
        return rank, pg + COLL_SUFFIX

    # -- every other kind of line, one by one -------------------------------------------------
    def line(self, raw: bytes) -> None:
        text = _decode(raw, self.report).rstrip("\r")
        prefix_rank, is_global, rest = split_prefix(text)
        if prefix_rank is not None:
            self.report.kinds.add("torchrun")
            if not is_global:
                self.trace.local_rank_prefixes = True
        rank = prefix_rank if prefix_rank is not None else self.file_rank
        if "NCCL INFO" in rest and "Init" in rest:
            m = _INIT.search(rest)
            if m:
                proc, ptr, r, nranks, comm_id = m.groups()
                self.inits[proc].append((ptr, int(r), int(nranks), comm_id or ""))
                self.report.kinds.add("nccl-coll")
            return
        if "Watchdog caught" in rest:
            self._watchdog(rest)
            return
        if "NCCL work:" in rest:
            self._work_status(rest)
            return
        if "CollectiveFingerPrint" in rest:
            self._fingerprints(rest)
        self._traceback_line(rest, rank)

    def _watchdog(self, text: str) -> None:
        m = _WATCHDOG.search(text)
        if not m:
            return
        pg_id, _, pg_old, rank, seq, op, numel, _ = m.groups()
        rank_i = int(rank)
        pg = normalize_pg(pg_id or pg_old or "")
        sig = self.trace.intern(Signature(normalize_op(op), numel or "", ""))
        self.trace.wait(rank_i, Wait(pg, int(seq), sig, "nccl-watchdog"))
        self.report.kinds.add("nccl-watchdog")
        self.report.ranks.add(rank_i)

    def _work_status(self, text: str) -> None:
        m = _WORK_STATUS.search(text)
        if not m:
            return
        pg_id, _, pg_old, rank, _, enqueued, completed = m.groups()
        state = self.trace.rank(int(rank))
        pg = normalize_pg(pg_id or pg_old or "")
        state.last_enqueued[pg] = int(enqueued)
        state.last_completed[pg] = int(completed)
        self.report.kinds.add("nccl-watchdog")
        self.report.ranks.add(int(rank))

    def _fingerprints(self, text: str) -> None:
        self.report.kinds.add("c10d-detail")
        for index, m in enumerate(_FINGERPRINT.finditer(text)):
            rank, seq, op, shape, dtype = m.groups()
            numel = ""
            if shape is not None:
                dims = [int(d) for d in re.findall(r"\d+", shape)]
                product = 1
                for d in dims:
                    product *= d
                numel = str(product)
            sig = self.trace.intern(
                Signature(normalize_op(op), numel, normalize_dtype(dtype) if dtype else "")
            )
            if index == 0:
                self.trace.wait(
                    int(rank), Wait(DEFAULT_PG + DETAIL_SUFFIX, int(seq), sig, "c10d-detail")
                )
                self.report.ranks.add(int(rank))
            else:
                self.claims.append((int(rank), int(seq), sig))

    def _traceback_line(self, text: str, rank: int | None) -> None:
        if rank is None:
            self._summary_line(text)
            return
        if _TB_START.match(text):
            self.tracebacks[rank] = []
            self.report.kinds.add("rank-log")
            self.report.ranks.add(rank)
            return
        frames = self.tracebacks.get(rank)
        if frames is None:
            self._summary_line(text)
            return
        m = _FRAME.match(text)
        if m:
            frames.append((m.group(1), int(m.group(2)), m.group(3)))
            return
        m = _EXCEPTION.match(text.strip())
        if m:
            del self.tracebacks[rank]
            self._finish_traceback(rank, frames, m.group(1), m.group(2) or "")

    def _finish_traceback(
        self, rank: int, frames: list[tuple[str, int, str]], name: str, message: str
    ) -> None:
        if name.rsplit(".", 1)[-1] in _LAUNCHER_ERRORS:
            return
        error = f"{name}: {message}".strip().rstrip(":")
        state = self.trace.rank(rank)
        collective = None
        for index in range(len(frames) - 1, -1, -1):
            path, _, func = frames[index]
            if path.endswith("distributed_c10d.py") and func in COLLECTIVE_FUNCS:
                collective = index
                break
        user = [
            f
            for f in frames[: collective if collective is not None else None]
            if not _is_torch(f[0])
        ]
        site = f"{Path(user[-1][0]).name}:{user[-1][1]}" if user else ""
        if collective is None:
            state.failure = f"{error}" + (f" (at {site})" if site else "")
            return
        state.error = error
        op = normalize_op(frames[collective][2])
        self.trace.wait(
            rank, Wait(DEFAULT_PG, None, self.trace.intern(Signature(op)), "traceback", site)
        )

    def _summary_line(self, text: str) -> None:
        m = _SUMMARY_RANK.match(text)
        if m:
            self.summary_rank = int(m.group(1))
            self.report.kinds.add("torchrun")
            self.trace.rank(self.summary_rank)
            return
        m = _SUMMARY_EXIT.match(text)
        if m and self.summary_rank is not None:
            code, signal = int(m.group(1)), m.group(2)
            state = self.trace.rank(self.summary_rank)
            self.report.ranks.add(self.summary_rank)
            self.summary_rank = None
            if signal == "SIGTERM" or (code == 0 and not signal):
                return  # stopped by the launcher after another rank failed, or finished
            if not state.failure and not state.waits:
                state.failure = f"killed by {signal}" if signal else f"exited with code {code}"

    def finish(self) -> None:
        for rank, seq, sig in self.claims:
            state = self.trace.rank(rank)
            if not state.waits:
                self.trace.wait(rank, self._claim_wait(seq, sig))
        self.finish_coll()

    @staticmethod
    def _claim_wait(seq: int, sig: int) -> Wait:
        return Wait(DEFAULT_PG + DETAIL_SUFFIX, seq, sig, "c10d-detail (reported by a peer)")


def _first_and_last_opcount(body: bytes) -> tuple[int, int]:
    first = _OPCOUNT.search(body)
    window = 4096
    while True:
        tail = list(_OPCOUNT.finditer(body, max(0, len(body) - window)))
        if tail or window >= len(body):
            break
        window *= 8
    if first is None or not tail:
        return 0, 0
    return int(first.group(1), 16), int(tail[-1].group(1), 16)


def _is_torch(path: str) -> bool:
    norm = path.replace("\\", "/")
    return "/torch/" in norm or norm.startswith("<frozen")


def scan_text(
    path: Path, trace: Trace, report: InputReport, rank: int | None, is_global: bool
) -> None:
    """Stream a text log into ``trace``."""
    scanner = _TextScanner(trace, report, rank, is_global)
    with path.open("rb") as fh:
        tail = b""
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            nuls = chunk.count(b"\0")
            if nuls == len(chunk):
                report.garbage_bytes += nuls + _skip_hole(fh)
                continue
            if nuls:  # binary garbage: drop it, keep the text around it
                report.garbage_bytes += nuls
                chunk = chunk.translate(None, b"\0")
            buf = tail + chunk
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                if len(buf) < MAX_LINE:
                    tail = buf
                    continue
                cut = len(buf)
                report.truncated_lines += 1
            body, tail = buf[:cut], buf[cut:]
            _scan_body(body, scanner, report)
        if tail:
            _scan_body(tail + b"\n", scanner, report)
            report.problems.append("the last line has no newline (the log may be cut short)")
    scanner.finish()


def _skip_hole(fh) -> int:
    """Jump over a hole of a sparse file (zeros that are not stored); return the bytes skipped."""
    here = fh.tell()
    try:
        after = os.lseek(fh.fileno(), here, os.SEEK_DATA)
    except (AttributeError, OSError):  # no SEEK_DATA here, or nothing but the hole is left
        after = os.fstat(fh.fileno()).st_size
    fh.seek(after)
    return after - here


def _scan_body(body: bytes, scanner: _TextScanner, report: InputReport) -> None:
    lines = body.count(b"\n")
    report.lines += lines
    nccl = body.count(_NCCL_INFO)
    rest = body
    if nccl:
        if b"opCount" in body:
            scanner.coll_chunk(body)
        for line in _lines_with(body, (b" - Init ",)):
            scanner.line(line)
        # Keyword search only in the other lines: NCCL INFO lines are the bulk of such logs.
        rest = (
            b""
            if nccl >= lines
            else b"\n".join(x for x in body.split(b"\n") if _NCCL_INFO not in x)
        )
    for line in _lines_with(rest, _KEYWORDS):
        if len(line) > MAX_LINE:
            report.truncated_lines += 1
            line = line[:MAX_LINE]
        scanner.line(line)


def _lines_with(body: bytes, keywords: tuple[bytes, ...]) -> list[bytes]:
    """The lines of ``body`` that contain one of ``keywords``, in order (found with C substring
    search, without splitting the text into lines)."""
    starts = set()
    for keyword in keywords:
        pos = body.find(keyword)
        while pos >= 0:
            starts.add(body.rfind(b"\n", 0, pos) + 1)
            end = body.find(b"\n", pos)
            if end < 0:
                break
            pos = body.find(keyword, end)
    lines = []
    for start in sorted(starts):
        end = body.find(b"\n", start)
        lines.append(body[start : end if end >= 0 else len(body)])
    return lines


# --- flight recorder ---------------------------------------------------------------------------
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
        if isinstance(frame, dict) and not _is_torch(str(frame.get("filename", ""))):
            return f"{Path(str(frame.get('filename'))).name}:{frame.get('line')}"
    return ""


def scan(path: Path, trace: Trace) -> InputReport:
    """Read one file of any supported kind into ``trace``."""
    report = InputReport(str(path))
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        report.problems.append(f"cannot read: {exc.strerror or exc}")
        return report
    if not head:
        report.problems.append("empty file")
        return report
    if head[:1] == b"\x80" or (head.lstrip()[:1] == b"{" and b'"entries"' in head):
        rank, is_global = rank_from_path(path, trailing_number=True)
        scan_dump(path, trace, report, rank if is_global else None)
        return report
    rank, is_global = rank_from_path(path)
    if rank is not None and is_global and head.strip(b"\0 \n"):
        # A rank's own log: the rank exists even if it logged nothing we recognise.
        trace.rank(rank)
        report.ranks.add(rank)
    try:
        scan_text(path, trace, report, rank, is_global)
    except OSError as exc:
        report.problems.append(f"cannot read: {exc.strerror or exc}")
    if report.garbage_bytes:
        report.problems.append(f"skipped {report.garbage_bytes} bytes of binary data")
    if report.undecodable_lines:
        report.problems.append(
            f"{report.undecodable_lines} line(s) were not UTF-8 and were read as Latin-1"
        )
    if report.truncated_lines:
        report.problems.append(f"{report.truncated_lines} over-long line(s) were cut")
    if not report.kinds:
        report.problems.append("nothing recognisable: no collectives, timeouts or tracebacks")
    elif rank is None and not report.ranks:
        report.problems.append("could not tell which rank wrote this file")
    return report


PARALLEL_BYTES = 64 << 20
"""Inputs bigger than this in total are read by several processes, one file at a time each."""


def _scan_alone(path: Path) -> tuple[Trace, InputReport]:
    trace = Trace()
    return trace, scan(path, trace)


def _workers(files: list[Path]) -> int:
    import multiprocessing as mp

    try:
        total = sum(f.stat().st_size for f in files)
        cpus = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return 1
    if total < PARALLEL_BYTES or len(files) < 2 or "fork" not in mp.get_all_start_methods():
        return 1
    return max(1, min(cpus, len(files), 8))


def scan_all(files: list[Path]) -> tuple[Trace, list[InputReport]]:
    """Read every file; big inputs in parallel (same result as reading them in order)."""
    workers = _workers(files)
    trace = Trace()
    if workers == 1:
        return trace, [scan(f, trace) for f in files]
    import multiprocessing as mp  # only here: these imports cost the fast path's start-up
    from concurrent.futures import ProcessPoolExecutor

    reports = []
    chunk = max(1, len(files) // (workers * 4))
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
        for part, report in pool.map(_scan_alone, files, chunksize=chunk):
            trace.merge(part)
            reports.append(report)
    return trace, reports
