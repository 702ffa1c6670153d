"""benchmarks/train_gpu.py: a clean refusal without CUDA, and its plumbing on CPU (--smoke)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed import quiet_env

pytestmark = [pytest.mark.slow, pytest.mark.torch]
torch = pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "train_gpu.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=quiet_env(),
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_exits_2():
    proc = run()
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stdout and "Traceback" not in proc.stderr


def test_smoke_run_prints_a_table_row_per_variant():
    proc = run("--smoke", "--variants", "fsdp2-bf16")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| fsdp2-bf16 |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert float(cells[1].replace(",", "")) > 0  # tokens/s
    assert cells[5].endswith("GiB") and float(cells[6]) > 0  # peak memory, final loss


def test_unknown_variant_is_refused():
    proc = run("--variants", "fsdp3")
    assert proc.returncode == 2 and "unknown variant" in proc.stdout
