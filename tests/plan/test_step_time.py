"""The step-time model's compute and optimizer terms against measured CPU runs.

``scripts/step_time.py`` times small Llama models and the fused CPU AdamW in thread CPU time
(one thread), so the load of other processes on the machine does not move the figures; the
planner predicts the larger model's compute from the MFU measured on the smaller, and a
large parameter set's optimizer step from the rate measured on a smaller one. Tolerances,
and why:

- compute, 25%: the FLOP count is exact (test_step.py checks it against torch's counter),
  but a fixed MFU ignores that the ops FLOPs leave out (norms, softmax, the loss, element-
  wise) are a larger share of a narrow model; measured: the 2x wider model within +4..10%.
- checkpointing's extra compute, 10% of the step: recomputation runs those same ops again,
  in the same proportion. Compared with the median of the ratios timed back to back in each
  round: the ratio of the least times alone moved by up to 0.15 between runs for the small
  model (a short step), and failed a CI run at 0.105.
- CPU optimizer step, 20%: the fused kernel streams memory, so time follows parameters;
  what is left is memory-bandwidth noise from other processes (their stalls count as CPU
  time), so the two sets' steps are timed interleaved; measured within 5%, also next to a
  process copying 256 MB buffers in a loop (timed one after the other, a CI run under the
  parallel suite read -38%).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed import quiet_env

SCRIPT = Path(__file__).parent / "scripts" / "step_time.py"
pytestmark = [pytest.mark.slow, pytest.mark.torch]


@pytest.fixture(scope="module")
def measured() -> dict:
    pytest.importorskip("transformers")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600, env=quiet_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"RESULT (\{.*\})", proc.stdout)
    assert found, proc.stdout[-2000:]
    return json.loads(found.group(1))


def _error(entry: dict) -> float:
    return (entry["planned"] - entry["measured"]) / entry["measured"]


def test_compute_term_predicts_a_wider_model(measured):
    compute = measured["compute"]
    assert 0.05 < measured["mfu"] <= 1.0  # a CPU reaches a fair share of its matmul rate
    for name in ("large", "large+ac"):
        assert abs(_error(compute[name])) <= 0.25, (name, compute[name])


def test_checkpointing_adds_what_recomputation_costs(measured):
    compute = measured["compute"]
    for name in ("small", "large"):
        plain, ckpt = compute[name], compute[name + "+ac"]
        planned = ckpt["planned"] / plain["planned"]
        real = ckpt["ratio"]  # the median of the ratios timed back to back
        assert abs(planned - real) <= 0.10, (name, planned, real)


def test_cpu_optimizer_term_predicts_a_larger_shard(measured):
    optimizer = measured["optimizer"]
    assert abs(_error(optimizer)) <= 0.20, optimizer
