"""Benchmark: loading flight-recorder dumps with the bounded, restricted unpickler.

Writes one pickled dump per size (entries x frames per entry, with the fields torch writes),
then times, in the same run on the same bytes: ``pickle.loads`` (the baseline: no check at
all), ``safepickle.loads_plain`` (the opcode check, then the same C unpickler), and the
opcode check alone. The check reads every opcode in Python, so it is the cost of refusing
billion-laughs pickles before building anything.

    python benchmarks/dump_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from fsdp_skill.diagnose import safepickle  # noqa: E402

SIZES = ((200, 20), (2000, 20), (2000, 40), (4000, 60))


def dump(entries: int, frames: int) -> bytes:
    rng = random.Random(0)
    stack = [
        {"name": f"fn{j}", "filename": f"/venv/site-packages/torch/nn/mod{j}.py", "line": j}
        for j in range(frames)
    ]
    items = [
        {
            "frames": [dict(f, line=rng.randint(1, 4000)) for f in stack],
            "record_id": i,
            "pg_id": 0,
            "process_group": ("0", "default_pg"),
            "collective_seq_id": i,
            "p2p_seq_id": 0,
            "op_id": i,
            "profiling_name": "nccl:all_reduce",
            "time_created_ns": rng.getrandbits(60),
            "input_sizes": [[rng.randint(1, 1 << 24)]],
            "input_dtypes": ["BFloat16"],
            "output_sizes": [[4096]],
            "output_dtypes": ["BFloat16"],
            "state": "completed",
            "time_discovered_started_ns": None,
            "time_discovered_completed_ns": None,
            "retired": True,
            "timeout_ms": 600000,
            "is_p2p": False,
        }
        for i in range(entries)
    ]
    return pickle.dumps({"version": "2.10", "rank": 0, "entries": items, "pg_status": {}})


def best(fn, data: bytes, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(data)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"best of {args.repeat}, Python {sys.version.split()[0]}")
    print("| dump (entries x frames) | MB | pickle.loads s | loads_plain s | check alone s |")
    print("|---|---:|---:|---:|---:|")
    for entries, frames in SIZES:
        data = dump(entries, frames)
        plain = best(pickle.loads, data, args.repeat)
        bounded = best(safepickle.loads_plain, data, args.repeat)
        check = best(safepickle.check_shape, data, args.repeat)
        print(
            f"| {entries} x {frames} | {len(data) / 1e6:.1f} | {plain:.3f} | {bounded:.3f} "
            f"| {check:.3f} |"
        )


if __name__ == "__main__":
    main()
