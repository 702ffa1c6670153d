"""Lines read one by one: NCCL watchdog timeouts, DETAIL mismatch reports, Python tracebacks
and torchrun's failure summary."""

from __future__ import annotations

import re
from pathlib import Path

from fsdp_skill.diagnose.report import InputReport
from fsdp_skill.diagnose.trace import (
    DEFAULT_PG,
    DETAIL_SUFFIX,
    Signature,
    Trace,
    Wait,
    normalize_dtype,
    normalize_op,
    normalize_pg,
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
    r"OpType=(\w+)(?:, TensorShape=\[([^\[\]]*)\], TensorDtypes=(\w+))?"
)
# --- Python tracebacks and torchrun's failure summary ----------------------------------------
_TB_START = re.compile(r"^\s*Traceback \(most recent call last\)")
_FRAME = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?::\s?(.*))?$")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)[^(]*(?:\(pid: \d+\))?\s*(?:\((SIG\w+)\))?")

COLLECTIVE_FUNCS = frozenset(
    "all_reduce all_gather all_gather_into_tensor all_gather_object all_gather_coalesced "
    "all_reduce_coalesced all_to_all all_to_all_single barrier monitored_barrier broadcast "
    "broadcast_object_list gather gather_object reduce reduce_scatter reduce_scatter_tensor "
    "scatter scatter_object_list send recv isend irecv batch_isend_irecv _all_gather_base "
    "_reduce_scatter_base".split()
)
_LAUNCHER_ERRORS = ("ChildFailedError", "SignalException")


class LineReader:
    """Facts from the non-NCCL lines of one input, per rank."""

    def __init__(self, trace: Trace, report: InputReport, file_rank: int | None):
        self.trace = trace
        self.report = report
        self.file_rank = file_rank
        self.tracebacks: dict[int, list[tuple[str, int, str]]] = {}
        self.summary_rank: int | None = None
        self.claims: list[tuple[int, int, int]] = []

    def line(self, text: str, rank: int | None) -> None:
        """Read one line (without its rank prefix) that ``rank`` printed, if known."""
        if "Watchdog caught" in text:
            self._watchdog(text)
            return
        if "NCCL work:" in text:
            self._work_status(text)
            return
        if "CollectiveFingerPrint" in text:
            self._fingerprints(text)
        self._traceback_line(text, rank)

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
            if not is_torch_frame(f[0])
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

    @staticmethod
    def _claim_wait(seq: int, sig: int) -> Wait:
        return Wait(DEFAULT_PG + DETAIL_SUFFIX, seq, sig, "c10d-detail (reported by a peer)")


def is_torch_frame(path: str) -> bool:
    norm = path.replace("\\", "/")
    return "/torch/" in norm or norm.startswith("<frozen")
