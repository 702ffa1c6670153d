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


def _tables(markdown: str) -> list[list[dict[str, str]]]:
    """Each Markdown table of the output as a list of {header: cell} rows."""
    tables, header = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            tables.append([])
        elif not set(line) <= set("|-"):
            tables[-1].append(dict(zip(header, cells, strict=True)))
    return tables


def test_compare_prints_the_estimators_and_the_recommendations():
    proc = _run(str(BENCH / "plan_compare.py"), "--markdown")
    assert proc.returncode == 0, proc.stderr
    estimators, cases = _tables(proc.stdout)
    assert len(estimators) == 4 and len(cases) == 4
    for row in estimators:
        # DeepSpeed's 18 bytes/param + 4 x largest layer sits above our 16 bytes/param states
        assert float(row["DeepSpeed Z3"]) > float(row["plan: states"])
        assert row["plan: pick's step s (tokens/s)"] != "-"
    picks = {row["case"]: row for row in cases}
    assert picks["13B, 4 x 80 GB"]["pick"] == "fsdp2-full-shard+ac"
    assert "not checked" in picks["llama-3-70b, 2 nodes x 8 x 80 GB"]["host GB per node"]


def test_cpu_adam_benchmark_measures_the_rates():
    proc = _run(str(BENCH / "cpu_adam.py"), "--params", "2e6", "--hidden", "256", "--repeats", "2")
    assert proc.returncode == 0, proc.stderr
    rows = _tables(proc.stdout)[0]
    assert {r["clock"] for r in rows} >= {"thread CPU time", "wall"}


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
        "--steps",
        "2",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rows,) = _tables(proc.stdout)
    assert [r["strategy"] for r in rows] == ["fsdp2-full-shard+ac"]
    assert float(rows[0]["measured GB"]) > 0 and float(rows[0]["measured step s"]) > 0


@pytest.mark.slow
@pytest.mark.torch
def test_gpu_benchmark_refuses_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the benchmark would run")
    proc = _run(str(BENCH / "plan_gpu.py"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "CUDA GPU" in proc.stderr and "--device cpu" in proc.stderr
