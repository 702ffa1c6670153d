"""The facts of one matched error that its pitfall's general text cannot know.

A collective mismatch names the ops, shapes and ranks on each side; a torchrun failure summary
points at the root-cause rank and, when the same text holds it, that rank's own error; a
watchdog timeout says which collective, sequence number and ranks timed out; a generic NCCL
error code quotes the warning NCCL printed about the call that failed.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable

from fsdp_skill.diagnose.normalize import Normalized

_WINDOW = 2000
"""How far after a fingerprint's start its fields are looked for."""

# --- TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch reports ----------------------------------------
_RUNNING = re.compile(r"Rank (\d{1,7}) is running (?:inconsistent )?collective: ")
_OP = re.compile(r"OpType=(\w{1,40})")
_SHAPE = re.compile(r"TensorShape=\[([^\]]{0,200})\]")
_DTYPE = re.compile(r"TensorDtypes=(\w{1,20})")
_BARE_OP = re.compile(r"(\w{1,40})")
_DIFFER = re.compile(r"Collectives differ in the following aspects: ?([^\n]{0,200})")


def _fingerprint(view: str, start: int) -> str:
    if view.startswith("CollectiveFingerPrint(", start):
        body = view[start : start + _WINDOW]
        end = body.find("CollectiveFingerPrint(", 1)
        body = body if end < 0 else body[:end]
        op, shape, dtype = _OP.search(body), _SHAPE.search(body), _DTYPE.search(body)
        parts = [op.group(1) if op else "?"]
        if shape:
            parts.append(f"shape [{shape.group(1)}]")
        if dtype:
            parts.append(dtype.group(1))
        return " ".join(parts)
    bare = _BARE_OP.match(view, start)
    return bare.group(1) if bare else "?"


def collective_mismatch(norm: Normalized) -> str:
    """``rank 1: ALLREDUCE shape [4] Float; rank 2: BROADCAST shape [4] Float (…)``."""
    view = norm.joined
    sides: dict[str, str] = {}
    for m in _RUNNING.finditer(view):
        sides.setdefault(m.group(1), _fingerprint(view, m.end()))
        if len(sides) >= 8:
            break
    if not sides:
        return ""
    text = "; ".join(f"rank {rank}: {what}" for rank, what in sides.items())
    differ = _DIFFER.search(norm.by_line)
    if differ:
        text += f" (differ in: {differ.group(1).strip()})"
    return text


# --- torchrun's failure summary ---------------------------------------------------------------
_ROOT_CAUSE = re.compile(r"^Root Cause", re.MULTILINE)
_SUMMARY_RANK = re.compile(r"rank ?: ?(\d{1,7}) \(local[_ ]rank: ?\d{1,7}\)")
_SUMMARY_EXIT = re.compile(r"exitcode ?: ?(-?\d{1,4})")
_SUMMARY_TRACE = re.compile(r"traceback ?: ?([^\n]{0,200})")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d{1,4})\) local_rank: (\d{1,7})")
_EXCEPTION = re.compile(r"^[ \t]{0,40}([A-Za-z_][\w.]{0,500}?(?:Error|Exception))(?::|$)")
_LAUNCHER = ("ChildFailedError", "SignalException", "ProcessRaisedException", "CalledProcessError")
_NO_TRACE = "To enable traceback"


def _root_cause(norm: Normalized) -> tuple[int | None, str, str]:
    """(rank, exit code, what the summary says of it) of the first observed failure."""
    view = norm.by_line
    root = _ROOT_CAUSE.search(view)
    start = root.end() if root else 0
    rank = _SUMMARY_RANK.search(view, start)
    if rank:
        tail = view[rank.end() : rank.end() + _WINDOW]
        code = _SUMMARY_EXIT.search(tail)
        trace = _SUMMARY_TRACE.search(tail)
        said = trace.group(1).strip() if trace and _NO_TRACE not in trace.group(1) else ""
        return int(rank.group(1)), code.group(1) if code else "", said
    agent = _AGENT_FAILED.search(view)
    if agent:
        return int(agent.group(2)), agent.group(1), ""
    return None, "", ""


def _own_error(norm: Normalized, rank: int | None) -> tuple[int, str] | None:
    """The root-cause rank's own exception line (line index, text), if the text holds it."""
    fallback = None
    for index, line in enumerate(norm.lines):
        m = _EXCEPTION.match(line)
        if not m or m.group(1).rsplit(".", 1)[-1] in _LAUNCHER:
            continue
        if rank is not None and norm.ranks[index] == rank:
            return index, line.strip()
        if fallback is None and norm.ranks[index] is None:
            fallback = (index, line.strip())
    return fallback


_LAST_FAILURE: list = [lambda: None, None]
"""A weak reference to the text last asked about, and its failure: two readers ask for the
same one in a row (a weak one, so a long-lived server does not keep a large log alive)."""


def _failure(norm: Normalized) -> tuple[tuple[int | None, str, str], tuple[int, str] | None]:
    """``_root_cause`` and that rank's ``_own_error``, each one pass over the text, once per text."""
    if _LAST_FAILURE[0]() is not norm:
        cause = _root_cause(norm)
        _LAST_FAILURE[:] = [weakref.ref(norm), (cause, _own_error(norm, cause[0]))]
    return _LAST_FAILURE[1]


def child_failed(norm: Normalized) -> str:
    """Where the root-cause rank's own error is, or what to do to get it."""
    (rank, code, said), own = _failure(norm)
    who = f"rank {rank}" if rank is not None else "the first failed rank"
    exit_text = f" (exit code {code})" if code else ""
    if own:
        line, error = own
        return f"root cause: {who}{exit_text}; its own error, line {line + 1}: {error[:200]}"
    if said:
        return f"root cause: {who}{exit_text}: {said}"
    return (
        f"root cause: {who}{exit_text}; this text does not hold that rank's own error: look at "
        "its output above the summary, or rerun with `torchrun --log-dir DIR --tee 3` and "
        "decorate the entry point with @record"
    )


# --- NCCL watchdog --------------------------------------------------------------------------
_WATCHDOG = re.compile(
    r"\[Rank (\d{1,7})\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d{1,12}), "
    r"OpType=(\w{1,40})(?:, NumelIn=(\d{1,15}))?"
)
_COMPLETED = re.compile(r"last completed NCCL work: (-?\d{1,12})")


def watchdog_timeout(norm: Normalized) -> str:
    """``ranks 0, 3 timed out in ALLREDUCE #1580 (466119168 elements); last completed: #1579``."""
    seen: dict[tuple[str, str, str], set[int]] = {}
    for m in _WATCHDOG.finditer(norm.joined):
        key = (m.group(3), m.group(2), m.group(4) or "")
        seen.setdefault(key, set()).add(int(m.group(1)))
        if len(seen) > 16:
            break
    if not seen:
        return ""
    parts = []
    for (op, seq, numel), ranks in list(seen.items())[:4]:
        size = f" ({numel} elements)" if numel else ""
        plural = "s" if len(ranks) > 1 else ""
        parts.append(f"rank{plural} {', '.join(map(str, sorted(ranks)))}: {op} #{seq}{size}")
    text = "timed out in " + "; ".join(parts)
    done = _COMPLETED.search(norm.joined)
    if done:
        text += f"; last completed: #{done.group(1)}"
    return text


# --- NCCL's own warning behind a generic NCCL error code -----------------------------------
_NCCL_WARN = re.compile(r"(?:\bNCCL|\.\w{1,3}:\d{1,6}) WARN ([^\n]{1,300})")
"""``misc/nvmlwrap.cc:74 NCCL WARN …``; NCCL 2.3 and older print ``include/socket.h:311 WARN …``."""
_HARMLESS_WARN = ("Failed to open libibverbs",)
"""Warnings NCCL prints on healthy set-ups too (no InfiniBand verbs library: it uses sockets)."""


def nccl_warning(norm: Normalized) -> str:
    """``NCCL warned, line 12: Failed to open libnvidia-ml.so.1`` (the failing call's message)."""
    for m in _NCCL_WARN.finditer(norm.by_line):
        said = m.group(1).strip()
        if said and not said.startswith(_HARMLESS_WARN):
            return f"NCCL warned, line {norm.line_at(m.start()) + 1}: {said}"
    return ""


# --- a signal after the rank's own exception ---------------------------------------------------
def raised_before_signal(norm: Normalized) -> str:
    """``rank 1 raised first (line 6: RuntimeError: ...)``, when the rank torchrun reports as
    killed by a signal printed a Python exception of its own; else "".

    Such a rank was not killed out of the blue: the signal came while it was going down (torch
    2.13's Gloo aborts at interpreter exit when a process ends without
    ``destroy_process_group``), and its exception is the cause.
    """
    (rank, _, _), own = _failure(norm)
    if rank is None or own is None or norm.ranks[own[0]] != rank:
        return ""
    line, error = own
    return (
        f"rank {rank} raised first (line {line + 1}: {error[:200]}): that exception is the "
        "cause, the signal came as the process ended"
    )


AFTERMATH: dict[str, Callable[[Normalized], str]] = {
    "rank-killed-by-signal": raised_before_signal,
}
"""Readers that tell, for one text, that a pitfall's match is the aftermath of another error:
the match then ranks as a consequence, and what the reader says is its detail."""


_DETAILS: dict[str, Callable[[Normalized], str]] = {
    "collective-mismatch": collective_mismatch,
    "elastic-child-failed": child_failed,
    "nccl-watchdog-timeout": watchdog_timeout,
    "nccl-unhandled-system-error": nccl_warning,
    "nccl-internal-error": nccl_warning,
    "nccl-invalid-usage": nccl_warning,
    "nccl-unhandled-cuda-error": nccl_warning,
}


def detail(pitfall_id: str, norm: Normalized) -> str:
    """The specific facts of this error in this text, or ""."""
    reader = _DETAILS.get(pitfall_id)
    return reader(norm) if reader else ""


def aftermath(pitfall_id: str, norm: Normalized) -> str:
    """Why this pitfall's match is, in this text, the aftermath of another error, or ""."""
    reader = AFTERMATH.get(pitfall_id)
    return reader(norm) if reader else ""
