"""NCCL_DEBUG=INFO logs: communicator set-up lines and NCCL_DEBUG_SUBSYS=COLL collective lines.

Collective lines are by far the most numerous lines of any log, so they are matched per chunk
in bulk and interned without a Python loop per line (one process and one communicator per
chunk, the usual case); only chunks that mix processes or lose lines go line by line.
"""

from __future__ import annotations

import re
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import count
from operator import itemgetter

from fsdp_skill.diagnose.report import InputReport
from fsdp_skill.diagnose.trace import (
    COLL_SUFFIX,
    DEFAULT_PG,
    NCCL_DTYPES,
    Signature,
    Trace,
    normalize_op,
)

NCCL_INFO = b" NCCL INFO "
# The groups of _COLL are exactly a collective's key (op, count, datatype, comm), so rows
# intern without building new tuples. Point-to-point lines ("recvbuff (nil)") do not match:
# sends and receives legitimately differ between ranks.
_COLL = re.compile(
    rb" NCCL INFO (\w+): opCount \w+ sendbuff \w+ recvbuff \w+ count (\d+) "
    rb"datatype (\d+) op \d+ root \d+ comm (\w+)"
)
# A host:pid token is matched from its first character only ((?<!...)): tried from inside a
# long run of such characters, the pattern would rescan the run once per character.
_COLL_SEQ = re.compile(
    rb"(?<![\w.\-])([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO (\w+): opCount ([0-9a-fA-F]+) sendbuff \w+ "
    rb"recvbuff \w+ count (\d+) datatype (\d+) op \d+ root \d+ comm (\w+)"
)
_OPCOUNT = re.compile(rb" NCCL INFO \w+: opCount ([0-9a-fA-F]+) sendbuff \w+ recvbuff \w+ ")
_PROC = re.compile(rb"(?<![\w.\-])([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO \w+: opCount")
_INIT = re.compile(
    r"(?<![\w.\-])([\w.\-]+:\d+):\d+ \[\d+\] NCCL INFO (?:\w+ )?comm (0x[0-9a-fA-F]+) "
    r"rank (\d+) nranks (\d+)"
)
_INIT_END = re.compile(r"- Init (?:START|COMPLETE)")
_COMM_ID = re.compile(r"commId (0x[0-9a-fA-F]+)")
"""An init line is its head (_INIT), then the commId (optional) before "- Init COMPLETE":
found one after the other, as two wildcards in one pattern would rescan the line."""


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


class CollReader:
    """The NCCL lines of one input, tied to global ranks and process groups at the end."""

    def __init__(self, trace: Trace, report: InputReport, file_rank: int | None, file_global: bool):
        self.trace = trace
        self.report = report
        self.file_rank = file_rank
        self.file_global = file_global
        self.inits: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)
        self.local_ids: defaultdict = defaultdict(count().__next__)
        self.runs: dict[tuple[str, str], _CollRun] = {}
        self.comm_order: dict[str, list[str]] = defaultdict(list)
        self.gaps = False

    def init_line(self, text: str) -> bool:
        """Record a communicator set-up line; False if ``text`` is not one."""
        m = _INIT.search(text)
        end = _INIT_END.search(text, m.end()) if m else None
        if not m or not end:
            return False
        proc, ptr, r, nranks = m.groups()
        comm = _COMM_ID.search(text, m.end(), end.start())
        comm_id = comm.group(1) if comm else None
        self.inits[proc].append((ptr, int(r), int(nranks), comm_id or ""))
        self.report.kinds.add("nccl-coll")
        return True

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

    def finish(self) -> None:
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
