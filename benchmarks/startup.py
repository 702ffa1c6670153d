"""Cold-start time of the fast-path commands, next to `python -c pass` measured in the same run.

Each command runs as a fresh process (as an agent calls it) N times; the table shows the
median and the 90th percentile wall time in milliseconds, and the cost over bare Python.

    python benchmarks/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE_SCRIPT = """\
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("nccl")
"""


SAMPLE_CONFIG = """\
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_state_dict_type: SHARDED_STATE_DICT
"""


def commands(workdir: Path) -> list[tuple[str, list[str]]]:
    script = workdir / "train.py"
    script.write_text(SAMPLE_SCRIPT)
    config = workdir / "fsdp.yaml"
    config.write_text(SAMPLE_CONFIG)
    fsdp = [sys.executable, "-m", "fsdp_skill"]
    return [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"]),
        ("fsdp-skill --help", [*fsdp, "--help"]),
        ("fsdp-skill search", [*fsdp, "search", "device mesh"]),
        ("fsdp-skill show", [*fsdp, "show", "pitfalls"]),
        ("fsdp-skill lint", [*fsdp, "lint", str(script)]),
        ("fsdp-skill lint (accelerate config)", [*fsdp, "lint", str(config)]),
        ("fsdp-skill explain", [*fsdp, "explain", "Watchdog caught collective operation timeout"]),
        ("fsdp-skill hang", [*fsdp, "hang", str(workdir)]),
    ]


def measure(argv: list[str], runs: int) -> list[float] | None:
    """Wall times in ms, or None if the command is not available (exit 2 on first run)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
        if proc.returncode == 2 and b"No such command" in proc.stderr:
            return None
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        baseline = None
        for label, argv in commands(Path(tmp)):
            measure(argv, 2)  # warm the file cache, as on a machine in use
            times = measure(argv, args.runs)
            if times is None:
                rows.append((label, None, None, None))
                continue
            median = statistics.median(times)
            p90 = statistics.quantiles(times, n=10)[-1]
            baseline = median if baseline is None else baseline
            rows.append((label, median, p90, median - baseline))
    print(f"cold start, {args.runs} runs each, Python {sys.version.split()[0]}")
    print("| command | median ms | p90 ms | over `python -c pass` ms |")
    print("|---|---:|---:|---:|")
    for label, median, p90, over in rows:
        if median is None:
            print(f"| {label} | n/a | n/a | n/a |")
        else:
            print(f"| {label} | {median:.0f} | {p90:.0f} | {over:+.0f} |")


if __name__ == "__main__":
    main()
