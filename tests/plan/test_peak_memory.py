"""The planner's per-GPU total against the real peak of a training step, on CPU.

The peak is read from the allocation events of ``torch.profiler`` over a steady-state step
(the CPU has no ``max_memory_allocated``), with the model sharded over 2 gloo ranks and the
step written as the planner's snippet and a Hugging Face loop write it.
``benchmarks/plan_gpu.py`` makes the same comparison on a CUDA device.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.distributed import run_ranks

SCRIPT = Path(__file__).parent / "scripts" / "peak_memory.py"
pytestmark = [pytest.mark.slow, pytest.mark.torch]


def test_planned_total_within_10_percent_of_measured_peak():
    proc = run_ranks(SCRIPT, 2, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)]
    assert len(rows) == 4, proc.stdout[-2000:]
    for row in rows:
        error = (row["planned"] - row["measured"]) / row["measured"]
        assert abs(error) <= 0.10, (row, f"{error:+.1%}")
