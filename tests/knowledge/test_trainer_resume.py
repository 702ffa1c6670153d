"""trainer-fsdp "Resuming on another number of GPUs", against the installed transformers.

``trainer_resume.py`` trains 48 samples in one epoch on two Gloo ranks (batch 2 per rank, so
12 steps) and saves at step 5, then resumes from that checkpoint on one rank: with the
accumulation doubled the global batch is unchanged and the run trains exactly the samples the
two ranks took after step 5, in their order; with it unchanged Trainer keeps step 5 but counts
24 steps per epoch and skips only 5 batches of 2, so it trains 10 samples a second time, and
the learning-rate schedule is rebuilt over 24 steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.distributed import run_ranks

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow, pytest.mark.torch]

SCRIPT = Path(__file__).with_name("trainer_resume.py")
ENV = {"HF_HUB_OFFLINE": "1"}


def _train(out: Path, nproc: int, *args: str) -> list[dict]:
    result = run_ranks(SCRIPT, nproc, [str(out), *args], timeout=240, env=ENV, cwd=out.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"seen-{r}.json").read_text()) for r in range(nproc)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("resume")
    two = _train(root / "two", 2)
    checkpoint = str(root / "two" / "checkpoint-5")
    return {
        "two": two,
        "same_global_batch": _train(root / "accum2", 1, "--accum", "2", "--resume", checkpoint)[0],
        "same_accumulation": _train(root / "accum1", 1, "--resume", checkpoint)[0],
    }


def _global_order(two: list[dict]) -> list[int]:
    """The samples of each step of the two-rank run, rank 0's micro-batch first."""
    first, second = (r["seen"] for r in two)
    return [
        i
        for step in range(12)
        for i in first[2 * step : 2 * step + 2] + second[2 * step : 2 * step + 2]
    ]


def test_the_two_rank_run_takes_every_sample_once(runs):
    order = _global_order(runs["two"])
    assert sorted(order) == list(range(48)) and runs["two"][0]["max_steps"] == 12


def test_doubled_accumulation_resumes_with_the_samples_left(runs):
    resumed = runs["same_global_batch"]
    assert resumed["max_steps"] == 12
    assert resumed["seen"] == _global_order(runs["two"])[20:]
    assert resumed["rates"] == pytest.approx(runs["two"][0]["rates"][5:])  # the schedule goes on


def test_unchanged_accumulation_trains_samples_twice(runs):
    resumed = runs["same_accumulation"]
    before_checkpoint = set(_global_order(runs["two"])[:20])
    assert resumed["max_steps"] == 24
    assert len(resumed["seen"]) == 38
    assert len(before_checkpoint & set(resumed["seen"])) == 10
    # the linear decay is rebuilt over 24 steps: after the restored rate of step 5, the rate
    # jumps up to where a 24-step schedule stands at step 6
    assert resumed["rates"][:2] == pytest.approx([5e-5 * (1 - 5 / 12), 5e-5 * (1 - 6 / 24)])
