"""``explain``: matching, ranking, rank prefixes, input handling and the command line."""

from __future__ import annotations

import json

import pytest

from fsdp_skill.diagnose import explain
from fsdp_skill.diagnose.render import read_explain_input
from fsdp_skill.errors import UsageError
from tests.cli import fsdp
from tests.diagnose.capture import ERROR_FIXTURES, split_batch

WATCHDOG = (
    "[rank3]:[E1130 10:12:03.000003 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1024, "
    "NumelOut=1024, Timeout(ms)=600000) ran for 600042 milliseconds before timing out."
)


def test_match_carries_the_contract_fields():
    (match,) = explain(WATCHDOG)["matches"]
    assert match["id"] == "nccl-watchdog-timeout"
    for key in ("id", "title", "cause", "fix", "refs", "confidence", "matched"):
        assert match[key]
    assert match["ranks"] == [3]
    assert "Watchdog caught" in match["matched"] and not match["matched"].startswith("[rank3]")
    assert any(ref.startswith("https://docs.pytorch.org/") for ref in match["refs"])
    assert "references/pitfalls.md#nccl-watchdog-timeout" in match["refs"]


def test_no_match_is_empty():
    assert explain("everything is fine, loss 0.42")["matches"] == []


def test_no_match_searches_the_references_with_the_exception_line():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/train.py", line 12, in <module>\n'
        "    main()\n"
        "RuntimeError: sharded optimizer state dict gathered on cpu is too large 123456\n"
    )
    result = explain(text)
    assert result["matches"] == []
    assert result["searched"].startswith("RuntimeError: sharded optimizer state dict")
    assert "123456" not in result["searched"] and "/home/u" not in result["searched"]
    assert result["related"], "the fallback found no section at all"
    for section in result["related"]:
        assert set(section) == {"id", "title", "path", "snippet"}


def test_empty_input_is_a_usage_error():
    with pytest.raises(UsageError, match="empty input"):
        explain(" \n\t ")
    result = fsdp("explain", "-", input="")
    assert result.code == 2
    assert result.err.startswith("fsdp-skill: error: empty input")
    assert "Traceback" not in result.err


def test_text_output_names_sections_as_show_commands():
    result = fsdp("explain", WATCHDOG)
    assert "fsdp-skill show pitfall:nccl-watchdog-timeout" in result.out
    assert "references/" not in result.out
    unknown = fsdp("explain", "ValueError: the frobnicator of the sharded widget is unhappy")
    assert unknown.code == 1
    assert "possibly related sections" in unknown.out and "fsdp-skill show " in unknown.out


def test_root_cause_ranks_above_the_launcher_summary():
    log = (ERROR_FIXTURES / "batch.log").read_text(encoding="utf-8")
    text = split_batch(log)["ddp_unused_parameters"] + (
        "\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "  exitcode  : 1 (pid: 4242)\n"
    )
    ids = [m["id"] for m in explain(text)["matches"]]
    assert ids == ["ddp-unused-parameters", "elastic-child-failed"]


def test_many_errors_in_one_log_are_all_found():
    texts = split_batch((ERROR_FIXTURES / "batch.log").read_text(encoding="utf-8"))
    ids = {m["id"] for m in explain("\n".join(texts.values()))["matches"]}
    assert {
        "default-process-group-not-initialized",
        "address-in-use",
        "state-dict-load-mismatch",
        "ddp-variable-marked-ready-twice",
    } <= ids


def test_signatures_are_general_not_one_line():
    """Other numbers, ranks, shapes and dtypes of the same message family still match."""
    variants = {
        "nccl-watchdog-timeout": "[Rank 117] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=3, OpType=_ALLGATHER_BASE, NumelIn=9, NumelOut=72, Timeout(ms)=1000)",
        "mixed-precision-dtype-mismatch": "mat1 and mat2 must have the same dtype, but got "
        "Half and Float",
        "state-dict-load-mismatch": "size mismatch for layers.3.attn.wq.weight: copying a param "
        "with shape torch.Size([4096, 4096]) from checkpoint, the shape in current model is "
        "torch.Size([512, 4096]).",
        "nccl-duplicate-gpu": "Duplicate GPU detected : rank 7 and rank 3 both on CUDA device "
        "e4000",
        "nonfinite-loss": "epoch 3 step 1200 | Loss: NaN | lr 3e-4",
    }
    for pitfall_id, text in variants.items():
        assert explain(text)["matches"][0]["id"] == pitfall_id, text


def test_read_input_from_file_argument_and_stdin(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    log.write_bytes(b"\x00\x00" + WATCHDOG.encode() + b"\n")
    assert "Watchdog" in read_explain_input(None, str(log))
    assert read_explain_input("abc", None) == "abc"
    with pytest.raises(UsageError, match="not both"):
        read_explain_input("abc", str(log))
    with pytest.raises(UsageError, match="cannot read"):
        read_explain_input(None, str(tmp_path / "missing.log"))


def test_cli_text_json_and_exit_codes(tmp_path):
    result = fsdp("explain", WATCHDOG)
    assert result.code == 0
    assert "nccl-watchdog-timeout" in result.out and "fix:" in result.out
    result = fsdp("explain", "--json", "-", input=WATCHDOG)
    assert json.loads(result.out)["matches"][0]["id"] == "nccl-watchdog-timeout"
    result = fsdp("explain", "--json", "nothing wrong here")
    assert result.code == 1
    out = json.loads(result.out)
    assert out["matches"] == [] and out["hang"] is None
    assert out["searched"] == "nothing wrong here"
    result = fsdp("explain", "--file", str(tmp_path / "missing.log"))
    assert result.code == 2
    assert result.err.startswith("fsdp-skill: error: cannot read")


def test_ranks_from_torchrun_failure_summary():
    from tests.diagnose.capture import FIXTURES

    text = (FIXTURES / "rank_killed" / "torchrun.log").read_text(encoding="utf-8")
    matches = {m["id"]: m for m in explain(text)["matches"]}
    assert matches["rank-killed-by-signal"]["ranks"] == [1]
    assert matches["peer-connection-lost"]["ranks"] == [0, 2]


def test_public_functions_are_not_shadowed_by_submodules():
    """Importing every submodule must leave `diagnose.explain` and `diagnose.hang` callable."""
    import importlib
    import pkgutil

    import fsdp_skill.diagnose as diagnose

    for info in pkgutil.iter_modules(diagnose.__path__):
        importlib.import_module(f"fsdp_skill.diagnose.{info.name}")
    assert callable(diagnose.explain) and callable(diagnose.hang)


# --- wording drift: the same message as people paste it ----------------------------------------

REQUIRES_GRAD = (
    "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`"
)


@pytest.mark.parametrize(
    "text",
    [
        REQUIRES_GRAD,
        REQUIRES_GRAD.replace("`", ""),  # quotes stripped
        REQUIRES_GRAD.replace("`", "'"),  # other quotes
        "ValueError: `FlatParameter` requires uniform `requires_grad`",  # torch 2.0 wording
        "[rank3]:[E1130 10:12:03.000003] ValueError: Must flatten tensors with uniform\n"
        "[rank3]:    requires_grad when use_orig_params=False",  # wrapped, prefixed
        "\x1b[31mValueError: Must flatten tensors with uniform requires_grad when "
        "use_orig_params=False\x1b[0m",  # ANSI colours
        "> (WorkerDict pid=9092) valueerror: must flatten tensors with UNIFORM requires_grad "
        "when use_orig_params=false",  # a quoted reply of a Ray worker's line, any case
    ],
)
def test_wording_drift_is_still_recognised(text):
    assert explain(text)["matches"][0]["id"] == "fsdp1-mixed-requires-grad"


def test_the_deciding_detail_wins_over_the_generic_family():
    text = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, invalid usage (run with NCCL_DEBUG=WARN for details), "
        "NCCL version 2.19.3\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Last error:\n"
        "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000\n"
    )
    ids = [m["id"] for m in explain(text)["matches"]]
    assert ids[:2] == ["nccl-duplicate-gpu", "nccl-invalid-usage"]
    shm = (
        "node1:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while creating shared memory "
        "segment /dev/shm/nccl-glnlGK (size 14156128)\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error\n"
    )
    assert [m["id"] for m in explain(shm)["matches"]][:2] == [
        "container-shm-too-small",
        "nccl-unhandled-system-error",
    ]


def test_nccl_system_error_with_a_missing_nvml_is_explained_as_that():
    # the log lines of https://github.com/NVIDIA/nccl-tests/issues/320, shortened
    text = (
        "[2025-06-12 16:57:52] gpu0301:842624:842643 [0] misc/nvmlwrap.cc:74 NCCL WARN Failed to "
        "open libnvidia-ml.so.1\n"
        "gpu0301:842624:842643 [0] NCCL INFO misc/nvmlwrap.cc:200 -> 2\n"
        "gpu0301: Test NCCL failure common.cu:1119 'unhandled system error (run with "
        "NCCL_DEBUG=INFO for details) / '\n"
    )
    matches = explain(text)["matches"]
    assert [m["id"] for m in matches][:2] == [
        "nccl-nvml-library-missing",
        "nccl-unhandled-system-error",
    ]
    assert matches[1]["detail"] == "NCCL warned, line 1: Failed to open libnvidia-ml.so.1"


def test_a_generic_nccl_error_quotes_the_warning_of_the_failing_call():
    old_format = (  # NCCL 2.3, https://github.com/NVIDIA/nccl-tests/issues/14
        "NCCL failure common.cu:874 'unhandled system error'\n"
        "e66aa18dc444:3171:3171 [0] misc/ibvwrap.cu:61 WARN Failed to open libibverbs.so[.1]\n"
        "e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address "
        "family not supported by protocol\n"
    )
    detail = explain(old_format)["matches"][0]["detail"]
    # the verbs library is optional (NCCL falls back to sockets): the socket failure decides
    assert detail == (
        "NCCL warned, line 3: Socket creation failed : Address family not supported by protocol"
    )
    no_warning = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error"
    assert "detail" not in explain(no_warning)["matches"][0]


def _fixture_log(case: str) -> str:
    from tests.diagnose.capture import FIXTURES

    return (FIXTURES / case / "torchrun.log").read_text(encoding="utf-8")


def _match(text: str, pitfall_id: str) -> dict:
    return next(m for m in explain(text)["matches"] if m["id"] == pitfall_id)


def test_collective_mismatch_names_the_ops_and_the_ranks():
    match = _match(_fixture_log("mismatch_op_detail"), "collective-mismatch")
    assert "ALLREDUCE" in match["detail"] and "BROADCAST" in match["detail"]
    assert "rank 1" in match["detail"]
    reduce_vs_gather = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
        "collective: CollectiveFingerPrint(SequenceNumber=7, OpType=REDUCE, TensorShape=[20, 10], "
        "TensorDtypes=Float), but Rank 1 is running collective: CollectiveFingerPrint("
        "SequenceNumber=7, OpType=ALLGATHER, TensorShape=[20, 10], TensorDtypes=Float). "
        "Collectives differ in the following aspects: Op type: REDUCEvs ALLGATHER"
    )
    detail = explain(reduce_vs_gather)["matches"][0]["detail"]
    assert detail.startswith("rank 0: REDUCE shape [20, 10] Float; rank 1: ALLGATHER")


def test_child_failed_points_at_the_root_cause_ranks_own_error():
    match = _match(_fixture_log("rank_raises"), "elastic-child-failed")
    assert match["detail"].startswith("root cause: rank 1")
    assert "data loader worker failed on this rank" in match["detail"]
    assert "fsdp-skill explain" not in match["fix"]
    summary_only = (
        "Root Cause (first observed failure):\n[0]:\n  time      : 2023-09-04_10:10:23\n"
        "  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 3669031)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )
    detail = explain(summary_only)["matches"][0]["detail"]
    assert detail.startswith("root cause: rank 3 (exit code 1); this text does not hold")


def test_a_signal_after_the_ranks_own_exception_is_its_aftermath():
    raised = explain(_fixture_log("rank_raises"))["matches"]
    ids = [m["id"] for m in raised]
    signal = next(m for m in raised if m["id"] == "rank-killed-by-signal")
    assert ids[0] == "elastic-child-failed" and signal["confidence"] < 0.7
    assert signal["detail"].startswith("rank 1 raised first (line 6: RuntimeError: data loader")
    killed = explain(_fixture_log("rank_killed"))["matches"]  # no exception of its own
    assert killed[0]["id"] == "rank-killed-by-signal" and "detail" not in killed[0]


def test_the_root_cause_is_looked_up_once_per_text(monkeypatch):
    from fsdp_skill.diagnose import details

    calls = []
    real = details._root_cause
    monkeypatch.setattr(details, "_root_cause", lambda norm: calls.append(1) or real(norm))
    ids = [m["id"] for m in explain(_fixture_log("rank_raises"))["matches"]]
    assert {"elastic-child-failed", "rank-killed-by-signal"} <= set(ids)
    assert len(calls) == 1  # both pitfalls' details read the same failure
    explain(_fixture_log("rank_raises"))
    assert len(calls) == 2  # a new text (even the same words) is read afresh


def test_a_log_of_several_ranks_also_gets_the_hang_verdict():
    result = explain(_fixture_log("rank_stalls"))
    assert result["hang"]["verdict"] == "missing-collective"
    assert result["hang"]["culprit_ranks"] == [1]
    assert explain(WATCHDOG)["hang"] is None  # one rank: nothing to compare


def test_matching_a_huge_line_stays_fast():
    import time

    text = "NCCL error in: " * 70_000 + "\n" + ("Watchdog caught " * 70_000)
    start = time.perf_counter()
    explain(text)
    assert time.perf_counter() - start < 10


BUFFER_INPLACE = (
    "RuntimeError: one of the variables needed for gradient computation has been modified by an "
    "inplace operation: [torch.cuda.FloatTensor [768]] is at version 3; expected version 2 "
    "instead."
)


@pytest.mark.parametrize(
    ("installed", "noted"), [("2.13.0+cpu", True), ("2.11.0", False), (None, False)]
)
def test_a_cause_for_other_torch_releases_carries_a_note(monkeypatch, installed, noted):
    """A pitfall whose torch range excludes the installed torch (here ``<2.12``) is still
    named, the text may come from another machine, but with a note saying so."""
    from fsdp_skill import knowledge
    from fsdp_skill.diagnose.render import explain_text

    monkeypatch.setattr(knowledge, "installed_torch_version", lambda: installed)
    result = explain(BUFFER_INPLACE)
    match = result["matches"][0]
    assert match["id"] == "ddp-buffer-broadcast-inplace"
    assert ("version_note" in match) is noted
    if noted:
        assert match["version_note"].startswith(
            f"this cause is for torch <2.12, and the installed torch is {installed}"
        )
        assert any(
            line.startswith("  note: this cause is for torch <2.12")
            for line in explain_text(result)
        )


def test_a_cause_for_every_release_carries_no_note(monkeypatch):
    from fsdp_skill import knowledge

    monkeypatch.setattr(knowledge, "installed_torch_version", lambda: "2.13.0")
    match = explain("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")[
        "matches"
    ][0]
    assert match["id"] == "cuda-oom-under-fsdp" and "version_note" not in match
