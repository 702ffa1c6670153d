"""Benchmark: ``fsdp-skill hang`` on NCCL COLL logs of growing size.

Writes one ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` log per rank (``ranks x collectives``
lines in all, one rank missing the last collective), then times the analysis in a fresh
process and reads its peak memory. The baseline, measured in the same run on the same files,
is a plain read of every byte with a newline count: the cost of the I/O alone.
"hang CPU s" adds the CPU time of all processes: on a busy machine it is the steadier figure.
Each row doubles the data of the row before, so time should double too; memory grows with
the compact per-rank sequences (4 bytes per collective) on top of the interpreter. Inputs over
64 MiB are read by one worker process per CPU; the last column is the largest worker's peak.

    python benchmarks/hang_bench.py                 # up to 1,024 ranks x 10,000 collectives
    python benchmarks/hang_bench.py --max-ranks 128 # a quick run
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OPS = (("AllGather", 4096), ("ReduceScatter", 16384), ("AllReduce", 1))

ANALYSE = """
import json, resource, sys, time
from fsdp_skill.diagnose import hang
start = time.perf_counter()
result = hang([sys.argv[1]])
me, workers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({
    "seconds": time.perf_counter() - start,
    "cpu_seconds": me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime,
    "peak_kib": me.ru_maxrss,
    "worker_peak_kib": workers.ru_maxrss,
    "verdict": result["verdict"],
    "culprits": result["culprit_ranks"],
    "ranks": result["ranks"],
}))
"""

BASELINE = """
import json, os, resource, sys, time
start = time.perf_counter()
lines = 0
for name in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], name), "rb") as fh:
        while chunk := fh.read(4 << 20):
            lines += chunk.count(b"\\n")
print(json.dumps({
    "seconds": time.perf_counter() - start,
    "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "lines": lines,
}))
"""


def write_logs(folder: Path, ranks: int, ops: int) -> int:
    """One COLL log per rank; the last rank stops one collective early. Returns bytes written."""
    folder.mkdir(parents=True)
    total = 0
    for rank in range(ranks):
        host, pid, dev = f"node{rank // 8:04d}", 1000 + rank % 8, rank % 8
        comm = f"0x55d{rank:07x}0"
        head = f"{host}:{pid}:{pid + 60} [{dev}] NCCL INFO"
        count = ops - 1 if rank == ranks - 1 else ops
        body = [
            f"{head} comm {comm} rank {rank} nranks {ranks} cudaDev {dev} nvmlDev {dev} "
            f"busId {dev}000 commId 0x1b2c3d4e5f607182 - Init COMPLETE\n"
        ]
        body += [
            f"{head} {OPS[i % 3][0]}: opCount {i:x} sendbuff 0x7f3a{i:08x} recvbuff "
            f"0x7f3b{i:08x} count {OPS[i % 3][1]} datatype 9 op 0 root 0 comm {comm} "
            f"[nranks={ranks}] stream 0x55e{rank:07x}\n"
            for i in range(count)
        ]
        data = "".join(body).encode()
        (folder / f"rank{rank}.log").write_bytes(data)
        total += len(data)
    return total


def run(script: str, folder: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-ranks", type=int, default=1024)
    parser.add_argument("--max-ops", type=int, default=10_000)
    args = parser.parse_args()
    sizes = []
    ranks, ops = args.max_ranks, args.max_ops
    for _ in range(5):
        sizes.append((ranks, ops))
        if len(sizes) % 2:
            ranks //= 2
        else:
            ops //= 2
    sizes.reverse()

    print(
        "| ranks | collectives/rank | log lines | log MiB | baseline read s | hang s "
        "| hang CPU s | peak MiB main | peak MiB per worker | verdict (culprits) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    root = Path(tempfile.mkdtemp(prefix="hang-bench-"))
    try:
        for ranks, ops in sizes:
            folder = root / f"{ranks}x{ops}"
            size = write_logs(folder, ranks, ops)
            base = run(BASELINE, folder)
            result = run(ANALYSE, folder)
            lines = base["lines"]
            peak = result["peak_kib"] / 1024
            worker = result["worker_peak_kib"] / 1024
            print(
                f"| {ranks:,} | {ops:,} | {lines:,} | {size / 2**20:,.0f} | {base['seconds']:.2f} "
                f"| {result['seconds']:.2f} | {result['cpu_seconds']:.2f} | {peak:,.0f} "
                f"| {worker:,.0f} "
                f"| {result['verdict']} ({', '.join(map(str, result['culprits']))}) |",
                flush=True,
            )
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
