"""``hang`` on the real output of failing gloo programs (``repro/errors.py`` under torchrun).

The fixtures were captured by ``capture.py`` with the installed torch; the slow test recaptures
them live, so a change in what torch prints is caught.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.diagnose import hang
from tests.diagnose.capture import CASES, FIXTURES, capture

EXPECTED = {
    # fixture: (verdict, culprits)
    "skip_collective": ("missing-collective", [1]),
    "skip_collective_detail": ("op-mismatch", [1]),
    "mismatch_op_fr": ("op-mismatch", [1]),
    "mismatch_op_detail": ("op-mismatch", [1]),
    "mismatch_size_detail": ("size-mismatch", [1]),
    "mismatch_dtype_detail": ("size-mismatch", [1]),
    "rank_raises": ("missing-collective", [1]),
    "rank_stalls_fr": ("missing-collective", [1]),
    "rank_stalls": ("missing-collective", [1]),
    "rank_killed": ("missing-collective", [1]),
    "extra_collective_fr": ("extra-collective", [1]),
    "all_wait": ("all-waiting", []),
}


def test_every_case_has_an_expectation():
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_saved_real_logs(name):
    result = hang([str(FIXTURES / name)])
    assert (result["verdict"], result["culprit_ranks"]) == EXPECTED[name]
    assert result["ranks"] == CASES[name][1]


@pytest.mark.parametrize("name", ["mismatch_op_fr", "rank_stalls_fr"])
def test_flight_recorder_dumps_alone(name):
    dumps = sorted(str(p) for p in (FIXTURES / name).glob("fr_rank*"))
    result = hang(dumps)
    assert (result["verdict"], result["culprit_ranks"]) == EXPECTED[name]
    assert {i["kind"] for i in result["inputs"]} == {"flight-recorder"}


def test_gloo_traceback_names_call_sites():
    d = hang([str(FIXTURES / "skip_collective")])["first_divergence"]
    assert d["majority"]["state"].startswith("ALLREDUCE at errors.py:")
    assert d["others"][0]["state"].startswith("BARRIER at errors.py:")


def test_killed_rank_is_reported_with_its_signal():
    d = hang([str(FIXTURES / "rank_killed")])["first_divergence"]
    assert d["others"][0]["failures"] == {"1": "killed by SIGKILL"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_live_capture(name, tmp_path: Path):
    scenario, nproc, detail, fr = CASES[name]
    capture(scenario, nproc, tmp_path, detail=detail, flight_recorder=fr)
    result = hang([str(tmp_path)])
    assert (result["verdict"], result["culprit_ranks"]) == EXPECTED[name], (
        tmp_path / "torchrun.log"
    ).read_text()[-3000:]


def test_json_flight_recorder_dumps_of_a_healthy_run():
    """Dumps written by ``_dump_fr_trace_json`` after two all_reduces that finished (gloo
    retires finished entries but leaves their state at "scheduled")."""
    result = hang([str(FIXTURES / "clean_fr_json")])
    assert (result["verdict"], result["culprit_ranks"]) == ("no-divergence", [])
    assert [i["kind"] for i in result["inputs"]] == ["flight-recorder", "flight-recorder"]
    assert result["rank_states"]["0"]["collectives"] == {"default": 2}


def test_a_quiet_rank_is_the_culprit_when_the_others_time_out():
    """Without a flight recorder: ranks 0 and 2 time out in an all_reduce, rank 1 (stuck in
    its data loader) prints nothing and is stopped by torchrun."""
    d = hang([str(FIXTURES / "rank_stalls")])["first_divergence"]
    assert d["majority"]["ranks"] == [0, 2]
    assert d["others"][0]["ranks"] == [1]
    assert d["others"][0]["state"].startswith("no collective error")
