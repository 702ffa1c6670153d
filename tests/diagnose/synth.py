"""Fault injection: synthetic multi-rank logs of every kind ``hang`` reads, with a known fault.

A job is a schedule of collectives (all-gather, reduce-scatter, all-reduce, as FSDP issues
them). A ``Fault`` changes what one rank does at one collective:

- ``missing``: the rank stops before collective ``seq`` (exception, stall, rank-dependent branch);
- ``extra``: the rank runs one more collective (a broadcast) after ``seq - 1``; the others stop;
- ``op`` / ``size`` / ``dtype``: the rank calls another op, element count or dtype at ``seq``;
- ``none``: every rank runs the same collectives and hangs in the last one.

Writers render the ranks' histories in each format, as the real programs print them:
NCCL ``NCCL_DEBUG=INFO`` COLL logs (one file per rank, or interleaved), NCCL watchdog timeouts
(torchrun's ``[rankN]:`` prefixed output, or one file per rank), ``TORCH_DISTRIBUTED_DEBUG=DETAIL``
mismatch reports, flight-recorder dumps (pickles with a ring buffer), and plain Python
tracebacks. ``EXPECTED`` says which verdict and culprits each fault must produce.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

OPS = (("ALLGATHER", 4096), ("REDUCESCATTER", 16384), ("ALLREDUCE", 1))
NCCL_NAMES = {
    "ALLGATHER": "AllGather",
    "REDUCESCATTER": "ReduceScatter",
    "ALLREDUCE": "AllReduce",
    "BROADCAST": "Broadcast",
}
FR_NAMES = {
    "ALLGATHER": "nccl:_allgather_base",
    "REDUCESCATTER": "nccl:_reduce_scatter_base",
    "ALLREDUCE": "nccl:all_reduce",
    "BROADCAST": "nccl:broadcast",
}
TORCH_DTYPES = {"float32": "Float", "bfloat16": "BFloat16"}
NCCL_DTYPES = {"float32": 7, "bfloat16": 9}

EXPECTED = {
    "missing": "missing-collective",
    "extra": "extra-collective",
    "op": "op-mismatch",
    "size": "size-mismatch",
    "dtype": "size-mismatch",
    "none": "all-waiting",
}
"""The verdict each fault must produce; the culprits are ``[fault.rank]`` (none for ``none``)."""


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int = 1
    seq: int = 7


@dataclass(frozen=True)
class Call:
    seq: int
    op: str
    numel: int
    dtype: str = "bfloat16"


def schedule(length: int) -> list[Call]:
    return [Call(i, OPS[i % 3][0], OPS[i % 3][1]) for i in range(length)]


def history(rank: int, fault: Fault, length: int) -> list[Call]:
    """The collectives ``rank`` launched before the job hung."""
    calls = schedule(length)
    if fault.kind == "none":
        return calls
    if fault.kind == "missing":
        return calls[: fault.seq] if rank == fault.rank else calls[: fault.seq + 1]
    if fault.kind == "extra":
        mine = calls[: fault.seq]
        if rank == fault.rank:
            mine.append(Call(fault.seq, "BROADCAST", 64))
        return mine
    mine = calls[: fault.seq + 1]
    if rank == fault.rank:
        last = mine[-1]
        if fault.kind == "op":
            mine[-1] = Call(last.seq, "BROADCAST", last.numel, last.dtype)
        elif fault.kind == "size":
            mine[-1] = Call(last.seq, last.op, last.numel + 128, last.dtype)
        elif fault.kind == "dtype":
            mine[-1] = Call(last.seq, last.op, last.numel, "float32")
    return mine


# --- NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL -----------------------------------------------------
def _proc(rank: int) -> tuple[str, int]:
    return f"gpu-node{rank // 8:03d}", 4000 + rank % 8  # pids repeat on every node


def nccl_lines(rank: int, world: int, calls: list[Call]) -> list[str]:
    host, pid = _proc(rank)
    dev = rank % 8
    comm = f"0x55d{rank:05x}a0"
    prefix = f"{host}:{pid}:{pid + 50} [{dev}] NCCL INFO"
    lines = [
        f"{host}:{pid}:{pid} [{dev}] NCCL INFO Bootstrap : Using eth0:10.0.{rank // 8}.{dev}<0>",
        f"{prefix} comm {comm} rank {rank} nranks {world} cudaDev {dev} nvmlDev {dev} "
        f"busId {dev}000 commId 0x7f3e5ac1d2b4 - Init COMPLETE",
    ]
    for c in calls:
        lines.append(
            f"{prefix} {NCCL_NAMES[c.op]}: opCount {c.seq:x} sendbuff 0x7f{c.seq:08x} "
            f"recvbuff 0x7f{c.seq:08x} count {c.numel} datatype {NCCL_DTYPES[c.dtype]} op 0 "
            f"root 0 comm {comm} [nranks={world}] stream 0x55{rank:06x}"
        )
    return lines


def write_nccl(folder: Path, world: int, fault: Fault, length: int = 40, interleaved=False):
    folder.mkdir(parents=True, exist_ok=True)
    per_rank = {r: nccl_lines(r, world, history(r, fault, length)) for r in range(world)}
    if interleaved:
        merged = []
        for i in range(max(map(len, per_rank.values()))):
            merged += [lines[i] for lines in per_rank.values() if i < len(lines)]
        (folder / "job.out").write_text("\n".join(merged) + "\n")
        return
    for rank, lines in per_rank.items():
        (folder / f"nccl-rank{rank}.log").write_text("\n".join(lines) + "\n")


# --- ProcessGroupNCCL watchdog, torchrun output -----------------------------------------------
def _watchdog(rank: int, call: Call) -> list[str]:
    stamp = f"[E1130 10:12:{rank % 60:02d}.{rank:06d} ProcessGroupNCCL.cpp:632]"
    return [
        f"{stamp} [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={call.seq}, OpType={call.op}, NumelIn={call.numel}, "
        f"NumelOut={call.numel}, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
        f"{stamp} [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or "
        f"timeout) detected by watchdog at work: {call.seq}, last enqueued NCCL work: "
        f"{call.seq + 1}, last completed NCCL work: {call.seq - 1}.",
    ]


def _summary(world: int, silent: set[int]) -> list[str]:
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60]
    lines += ["train.py FAILED", "-" * 60, "Failures:"]
    for rank in range(world):
        code, sig = (-15, "SIGTERM") if rank in silent else (-6, "SIGABRT")
        lines += [
            f"[{rank}]:",
            "  time      : 2026-11-30_10:12:44",
            f"  host      : {_proc(rank)[0]}",
            f"  rank      : {rank} (local_rank: {rank % 8})",
            f"  exitcode  : {code} (pid: {_proc(rank)[1]})  ({sig})",
            "  error_file: <N/A>",
            f"  traceback : Signal {-code} ({sig}) received by PID {_proc(rank)[1]}",
        ]
    return lines + ["=" * 60]


def write_watchdog(folder: Path, world: int, fault: Fault, per_rank_files=False, length=40):
    """Each rank's watchdog reports the collective it hangs in; a rank that never launched it
    reports nothing (it is busy elsewhere)."""
    folder.mkdir(parents=True, exist_ok=True)
    silent = set()
    blocks = {}
    for rank in range(world):
        calls = history(rank, fault, length)
        if fault.kind == "missing" and rank == fault.rank:
            silent.add(rank)
            blocks[rank] = [f"step {fault.seq // 3} data loading..."]
            continue
        blocks[rank] = _watchdog(rank, calls[-1])
    if per_rank_files:
        for rank, lines in blocks.items():
            (folder / f"rank{rank}.log").write_text("\n".join(lines) + "\n")
        return
    out = []
    for rank, lines in blocks.items():
        out += [f"[rank{rank}]:{line}" for line in lines]
    out += _summary(world, silent)
    (folder / "torchrun.log").write_text("\n".join(out) + "\n")


# --- TORCH_DISTRIBUTED_DEBUG=DETAIL -------------------------------------------------------------
def _fingerprint(call: Call) -> str:
    return (
        f"CollectiveFingerPrint(SequenceNumber={call.seq}, OpType={call.op}, "
        f"TensorShape=[{call.numel}], TensorDtypes={TORCH_DTYPES[call.dtype]}, "
        "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided "
        "(default), requires_grad=false (default), pinned_memory=false (default), "
        "memory_format=(nullopt)))"
    )


def write_detail(folder: Path, world: int, fault: Fault, length=40):
    """Every rank checks its collective against a peer's and reports the mismatch."""
    folder.mkdir(parents=True, exist_ok=True)
    last = {r: history(r, fault, length)[-1] for r in range(world)}
    out = []
    for rank in range(world):
        peer = fault.rank if rank != fault.rank else (rank + 1) % world
        out += [
            f"[rank{rank}]: Traceback (most recent call last):",
            f'[rank{rank}]:   File "/opt/job/train.py", line 88, in <module>',
            f"[rank{rank}]:     dist.all_reduce(t)",
            f'[rank{rank}]:   File "/usr/lib/python3/site-packages/torch/distributed/'
            'distributed_c10d.py", line 3245, in all_reduce',
            f"[rank{rank}]: RuntimeError: Detected mismatch between collectives on ranks. "
            f"Rank {rank} is running collective: {_fingerprint(last[rank])}, but Rank {peer} is "
            f"running collective: {_fingerprint(last[peer])}.Collectives differ in the "
            "following aspects: ",
        ]
    (folder / "torchrun.log").write_text("\n".join(out) + "\n")


# --- flight recorder ------------------------------------------------------------------------------
def fr_dump(rank: int, world: int, calls: list[Call], buffer: int = 25) -> dict:
    entries = []
    for index, c in enumerate(calls[-buffer:]):
        last = index == len(calls[-buffer:]) - 1
        entries.append(
            {
                "record_id": c.seq,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": c.seq + 1,
                "p2p_seq_id": 0,
                "op_id": c.seq + 1,
                "profiling_name": FR_NAMES[c.op],
                "time_created_ns": 1_700_000_000_000_000_000 + c.seq,
                "input_sizes": [[c.numel]],
                "input_dtypes": [TORCH_DTYPES[c.dtype]],
                "output_sizes": [[c.numel]],
                "output_dtypes": [TORCH_DTYPES[c.dtype]],
                "state": "started" if last else "completed",
                "time_discovered_started_ns": None,
                "time_discovered_completed_ns": None,
                "retired": not last,
                "timeout_ms": 600000,
                "is_p2p": False,
                "frames": [{"name": "train_step", "filename": "/opt/job/train.py", "line": 88}],
            }
        )
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": len(calls),
                "last_started_collective": len(calls),
                "last_completed_collective": len(calls) - 1,
            }
        },
        "entries": entries,
    }


def write_flight_recorder(folder: Path, world: int, fault: Fault, length=40):
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(world):
        dump = fr_dump(rank, world, history(rank, fault, length))
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dump))


# --- plain per-rank tracebacks --------------------------------------------------------------------
def write_tracebacks(folder: Path, world: int, fault: Fault):
    """One log per rank; ranks blocked in a collective time out inside it, the culprit fails
    elsewhere (``missing``) or every rank times out in the same call (``none``)."""
    folder.mkdir(parents=True, exist_ok=True)
    torch_c10d = "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"
    for rank in range(world):
        lines = ["Traceback (most recent call last):"]
        if fault.kind == "missing" and rank == fault.rank:
            lines += [
                '  File "/opt/job/train.py", line 71, in <module>',
                '  File "/opt/job/data.py", line 19, in __next__',
                "OSError: [Errno 5] Input/output error: '/mnt/data/shard-0042.bin'",
            ]
        else:
            lines += [
                '  File "/opt/job/train.py", line 88, in <module>',
                f'  File "{torch_c10d}", line 3245, in all_reduce',
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                "Timed out waiting 1800000ms for recv operation to complete",
            ]
        (folder / f"worker_rank{rank}.txt").write_text("\n".join(lines) + "\n")


WRITERS = {
    "nccl-per-rank": (write_nccl, ("missing", "extra", "op", "size", "dtype", "none")),
    "nccl-interleaved": (
        lambda f, w, x: write_nccl(f, w, x, interleaved=True),
        ("missing", "extra", "op", "size", "dtype", "none"),
    ),
    "watchdog-torchrun": (write_watchdog, ("missing", "op", "size", "none")),
    "watchdog-per-rank": (
        lambda f, w, x: write_watchdog(f, w, x, per_rank_files=True),
        ("missing", "op", "size", "none"),
    ),
    "detail": (write_detail, ("op", "size", "dtype")),
    "flight-recorder": (
        write_flight_recorder,
        ("missing", "extra", "op", "size", "dtype", "none"),
    ),
    "tracebacks": (write_tracebacks, ("missing", "none")),
}
"""Kind of input -> (writer, the faults that kind of input can show)."""
