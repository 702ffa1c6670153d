"""``hang`` on synthetic logs of every kind, each with a known injected fault."""

from __future__ import annotations

import pytest

from fsdp_skill.diagnose import hang
from tests.diagnose.synth import EXPECTED, WRITERS, Fault

CASES = [
    (kind, fault_kind, world, culprit)
    for kind, (_, faults) in WRITERS.items()
    for fault_kind in faults
    for world, culprit in ((4, 2), (8, 0))
]


@pytest.mark.parametrize(
    ("kind", "fault_kind", "world", "culprit"),
    CASES,
    ids=[f"{k}-{f}-ws{w}-r{c}" for k, f, w, c in CASES],
)
def test_verdict_and_culprits(tmp_path, kind, fault_kind, world, culprit):
    writer, _ = WRITERS[kind]
    fault = Fault(fault_kind, rank=culprit, seq=7)
    writer(tmp_path, world, fault)
    result = hang([str(tmp_path)])
    assert result["ranks"] == world
    assert result["verdict"] == EXPECTED[fault_kind], result["first_divergence"]
    expected_culprits = [] if fault_kind == "none" else [culprit]
    assert result["culprit_ranks"] == expected_culprits
    if fault_kind not in ("none",) and kind != "tracebacks":
        assert result["first_divergence"]["process_group"].startswith("default")


def test_first_divergence_names_the_collective(tmp_path):
    WRITERS["flight-recorder"][0](tmp_path, 4, Fault("size", rank=3, seq=10))
    d = hang([str(tmp_path)])["first_divergence"]
    # flight-recorder sequence numbers start at 1: schedule index 10 is collective 11
    assert (d["seq"], d["op"], d["numel"]) == (11, "REDUCESCATTER", "16384")
    assert d["majority"]["ranks"] == [0, 1, 2]
    assert d["others"] == [{"ranks": [3], "state": "REDUCESCATTER numel=16512 dtype=bfloat16"}]


def test_two_ranks_tie_is_flagged(tmp_path):
    WRITERS["flight-recorder"][0](tmp_path, 2, Fault("op", rank=1, seq=4))
    result = hang([str(tmp_path)])
    assert result["verdict"] == "op-mismatch"
    assert result["first_divergence"]["tie"] is True
    assert result["culprit_ranks"] == [1]


def test_two_ranks_missing_blames_the_rank_that_stopped(tmp_path):
    WRITERS["nccl-per-rank"][0](tmp_path, 2, Fault("missing", rank=0, seq=4))
    assert hang([str(tmp_path)])["culprit_ranks"] == [0]


def test_advice_pitfalls_and_next_run_env(tmp_path):
    WRITERS["watchdog-torchrun"][0](tmp_path, 4, Fault("none"))
    result = hang([str(tmp_path)])
    assert result["verdict"] == "all-waiting"
    assert "nccl-watchdog-timeout" in result["pitfalls"]
    names = {e["name"] for e in result["next_run_env"]}
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "NCCL_DEBUG"} <= names
    assert result["inputs"][0]["kind"] == "nccl-watchdog"


def test_mixed_kinds_in_one_folder(tmp_path):
    """Watchdog output plus flight-recorder dumps of the same job agree on the culprit."""
    fault = Fault("missing", rank=3, seq=9)
    WRITERS["watchdog-torchrun"][0](tmp_path / "logs", 6, fault)
    WRITERS["flight-recorder"][0](tmp_path / "dumps", 6, fault)
    result = hang([str(tmp_path / "logs"), str(tmp_path / "dumps")])
    assert result["culprit_ranks"] == [3]
    assert {i["kind"] for i in result["inputs"]} == {"flight-recorder", "nccl-watchdog"}


def test_parallel_reading_gives_the_same_result(tmp_path, monkeypatch):
    from fsdp_skill.diagnose import scan

    fault = Fault("size", rank=5, seq=12)
    WRITERS["nccl-per-rank"][0](tmp_path / "coll", 8, fault)
    WRITERS["flight-recorder"][0](tmp_path / "fr", 8, fault)
    WRITERS["watchdog-per-rank"][0](tmp_path / "wd", 8, fault)
    paths = [str(tmp_path)]
    sequential = hang(paths)
    monkeypatch.setattr(scan, "PARALLEL_BYTES", 0)
    assert scan._workers(sorted(tmp_path.rglob("*.log"))) > 1 or scan.os.cpu_count() == 1
    parallel = hang(paths)
    assert parallel == sequential
    assert parallel["culprit_ranks"] == [5]


def test_torchrun_log_dir_layout(tmp_path):
    """torchrun --log-dir writes attempt_N/<local_rank>/stderr.log; the folder names the rank."""
    flat = tmp_path / "flat"
    WRITERS["tracebacks"][0](flat, 3, Fault("missing", rank=1))
    for rank in range(3):
        target = tmp_path / "logs" / "attempt_0" / str(rank) / "stderr.log"
        target.parent.mkdir(parents=True)
        target.write_text((flat / f"worker_rank{rank}.txt").read_text())
    result = hang([str(tmp_path / "logs")])
    assert (result["verdict"], result["culprit_ranks"]) == ("missing-collective", [1])
    assert any("local ranks" in w for w in result["warnings"])


def test_a_single_ranks_watchdog_log_says_what_it_can(tmp_path):
    """One rank's timeout: its collective, sequence number and progress, and a request for the
    other ranks' logs; exit 1 (a hang was found), as --help says."""
    from tests.cli import fsdp

    log = tmp_path / "rank4.log"
    log.write_text(
        "[rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, "
        "NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600099 milliseconds "
        "before timing out.\n"
        "[rank4]:[E1206 18:44:12.755468433 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 4] Exception "
        "(either an error or timeout) detected by watchdog at work: 7753, last enqueued NCCL "
        "work: 7755, last completed NCCL work: 7752.\n"
    )
    result = fsdp("hang", "--json", str(log))
    assert result.code == 1
    data = result.json()
    assert data["verdict"] == "single-rank-waiting"
    d = data["first_divergence"]
    assert (d["seq"], d["last_completed"], d["last_enqueued"]) == (7753, 7752, 7755)
    assert d["op"] and "every rank" in " ".join(data["advice"])
    text = fsdp("hang", str(log)).out
    assert "last completed: #7752" in text
