"""The planner's benchmark scripts keep running (they are the README's numbers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )


def test_compare_prints_the_three_estimators():
    proc = _run(str(BENCH / "plan_compare.py"), "--markdown")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| llama")]
    assert len(rows) == 4
    cells = rows[0].split("|")
    # DeepSpeed's 18 bytes/param + 4 x largest layer sits above our 16 bytes/param states
    assert float(cells[9]) > float(cells[3])


@pytest.mark.slow
@pytest.mark.torch
def test_gpu_benchmark_measures_on_cpu_too():
    pytest.importorskip("transformers")
    proc = _run(
        str(BENCH / "plan_gpu.py"),
        "--device",
        "cpu",
        "--models",
        "llama-tiny",
        "--seq-len",
        "16",
        "--strategies",
        "fsdp2-full-shard+ac",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fsdp2-full-shard+ac" in proc.stdout
    assert "error" in proc.stdout
