"""Cold-start time of the fast-path commands, next to `python -c pass` measured in the same run.

Each command runs as a fresh process (as an agent calls it) N times; the table shows the
median and the 90th percentile wall time in milliseconds, the cost over bare Python, and the
median CPU time (user + system): on a busy machine wall time grows with the load, CPU time is
the figure that compares across runs. The load average is printed with the table.

The commands run with a bytecode cache, as ``pip install`` leaves a package and as every run
after the first finds it: the warm-up runs write it into a private ``PYTHONPYCACHEPREFIX``
(also where the environment sets ``PYTHONDONTWRITEBYTECODE``, which would otherwise make every
run compile the package from source).

    python benchmarks/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import resource
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


def cached_environment(workdir: Path) -> dict[str, str]:
    """This environment, writing bytecode into a private cache under ``workdir``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(workdir / "pycache")}


def measure(
    argv: list[str], runs: int, env: dict[str, str]
) -> tuple[list[float], list[float]] | None:
    """Wall and CPU times in ms, or None if the command is not available (exit 2 on first run)."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000)
        if proc.returncode == 2 and b"No such command" in proc.stderr:
            return None
    return times, cpu


def table(rows: list[tuple]) -> list[str]:
    lines = [
        "| command | median ms | p90 ms | over `python -c pass` ms | CPU ms (median) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, median, p90, over, cpu_ms in rows:
        if median is None:
            lines.append(f"| {label} | n/a | n/a | n/a | n/a |")
        else:
            lines.append(f"| {label} | {median:.0f} | {p90:.0f} | {over:+.0f} | {cpu_ms:.0f} |")
    return lines


def measure_all(workdir: Path, runs: int, env: dict[str, str]) -> list[tuple]:
    rows: list[tuple] = []
    baseline = None
    for label, argv in commands(workdir):
        measure(argv, 2, env)  # warm the file cache (and write the bytecode, where allowed)
        measured = measure(argv, runs, env)
        if measured is None:
            rows.append((label, None, None, None, None))
            continue
        times, cpu = measured
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        baseline = median if baseline is None else baseline
        rows.append((label, median, p90, median - baseline, statistics.median(cpu)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"cold start, {args.runs} runs each, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(table(measure_all(Path(tmp), args.runs, cached_environment(Path(tmp))))))
    load = os.getloadavg()
    print(
        f"\nload average while measuring: {load[0]:.1f} (5 min {load[1]:.1f}) on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
