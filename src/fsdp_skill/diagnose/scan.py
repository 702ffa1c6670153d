"""Reading inputs into the trace: text logs streamed in chunks, flight-recorder dumps loaded.

Nothing holds a whole text file. Each chunk goes in bulk to the NCCL reader (collective lines
are by far the most numerous); the other lines that can carry a fact are found by a keyword
pre-filter and handed one by one to the line reader with the rank that printed them.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsdp_skill.diagnose.flightrec import scan_dump
from fsdp_skill.diagnose.lines import LineReader
from fsdp_skill.diagnose.nccl import NCCL_INFO, CollReader
from fsdp_skill.diagnose.prefixes import split_prefix
from fsdp_skill.diagnose.report import InputReport, decode_line
from fsdp_skill.diagnose.sources import rank_from_path
from fsdp_skill.diagnose.trace import Trace

CHUNK = 4 << 20
MAX_LINE = 1 << 20
"""A line longer than this is cut: logs are lines, a megabyte without a newline is not one."""

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


class _TextScanner:
    """Sends each line of one text input to the reader of its kind, with the rank it belongs to."""

    def __init__(self, trace: Trace, report: InputReport, file_rank: int | None, file_global: bool):
        self.trace = trace
        self.report = report
        self.file_rank = file_rank
        self.coll = CollReader(trace, report, file_rank, file_global)
        self.lines = LineReader(trace, report, file_rank)

    def line(self, raw: bytes) -> None:
        try:
            self._line(raw)
        except (ValueError, OverflowError):  # a number no real log holds (10**5000, rank 2**40)
            self.report.out_of_range_lines += 1

    def coll_chunk(self, body: bytes) -> None:
        try:
            self.coll.coll_chunk(body)
        except (ValueError, OverflowError):
            self.report.out_of_range_lines += 1

    def _line(self, raw: bytes) -> None:
        text = decode_line(raw, self.report).rstrip("\r")
        prefix_rank, is_global, rest = split_prefix(text)
        if prefix_rank is not None:
            self.report.kinds.add("torchrun")
            if not is_global:
                self.trace.local_rank_prefixes = True
        if "NCCL INFO" in rest and "Init" in rest and self.coll.init_line(rest):
            return
        self.lines.line(rest, prefix_rank if prefix_rank is not None else self.file_rank)

    def finish(self) -> None:
        for reader in (self.lines, self.coll):
            try:
                reader.finish()
            except (ValueError, OverflowError):
                self.report.out_of_range_lines += 1


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


def scan_string(text: str, name: str = "<text>") -> tuple[Trace, InputReport]:
    """Read one pasted log (not a file) into a new trace, as ``scan_text`` reads a file."""
    trace = Trace()
    report = InputReport(name)
    scanner = _TextScanner(trace, report, None, True)
    data = text.encode("utf-8", errors="replace").replace(b"\0", b"")
    start = 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + CHUNK) + 1 or min(start + CHUNK, len(data))
        if end <= start or len(data) - start <= CHUNK:
            end = len(data)
        body = data[start:end]
        _scan_body(body if body.endswith(b"\n") else body + b"\n", scanner, report)
        start = end
    scanner.finish()
    return trace, report


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
    nccl = body.count(NCCL_INFO)
    rest = body
    if nccl:
        if b"opCount" in body:
            scanner.coll_chunk(body)
        for line in _lines_with(body, (b" - Init ",)):
            scanner.line(line)
        # Keyword search only in the other lines: NCCL INFO lines are the bulk of such logs.
        rest = (
            b"" if nccl >= lines else b"\n".join(x for x in body.split(b"\n") if NCCL_INFO not in x)
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
    if rank is not None and head.strip(b"\0 \n"):
        # A rank's own log: the rank exists even if it logged nothing we recognise.
        trace.rank(rank)
        report.ranks.add(rank)
        if not is_global:  # torchrun --log-dir numbers the folders by local rank
            trace.local_rank_prefixes = True
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
    if report.out_of_range_lines:
        report.problems.append(
            f"{report.out_of_range_lines} line(s) or block(s) with numbers out of range "
            "(ranks, sequence numbers, sizes) were skipped"
        )
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
    try:
        total = sum(f.stat().st_size for f in files)
        cpus = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return 1
    if total < PARALLEL_BYTES or len(files) < 2:
        return 1
    import multiprocessing as mp  # only for big inputs: its import costs every start-up

    if "fork" not in mp.get_all_start_methods():
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
