"""The generated project trains for real on CPU (gloo): loss, crash safety, resume, variants.

One tiny Llama model, a few seconds per run. The reference run (world size 2, 20 steps,
checkpoints every 5) is shared by the tests that compare against it.
"""

from __future__ import annotations

import json
import math
import os
import signal

import pytest

from tests.scaffold.runs import (
    TINY_MODEL,
    complete,
    copy_checkpoint,
    edit_config,
    kill_tree,
    losses,
    make_project,
    records,
    start,
    step_records,
    train,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.torch]
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("scaffold") / "proj", precision="fp32")


@pytest.fixture(scope="module")
def reference(project) -> dict[int, float]:
    """An uninterrupted run: world size 2, 20 steps, checkpoints every 5 into ck_ref."""
    recs, _ = train(project, 2, "--max-steps", "20", "--checkpoint-dir", "ck_ref", exit_check=True)
    return losses(recs)


def test_trains_at_world_size_2_and_the_loss_falls(project, reference):
    assert sorted(reference) == list(range(1, 21))
    assert all(math.isfinite(v) for v in reference.values())
    first = sum(reference[s] for s in (1, 2, 3)) / 3
    last = sum(reference[s] for s in (18, 19, 20)) / 3
    assert last < first - 0.5, reference
    # keep=3: the newest three checkpoints, each committed with its marker
    root = project / "ck_ref"
    assert complete(root) == ["step_00000010", "step_00000015", "step_00000020"]
    assert not list(root.glob(".tmp-*"))
    state = json.loads((root / "step_00000020" / "trainer_state.json").read_text())
    assert state["step"] == 20 and state["world_size"] == 2
    assert state["data"] == {"epoch": 0, "consumed": 20 * 4 * 2}
    assert state["global_batch_size"] == 8 and state["schedule_steps"] == 100


def test_sigkill_mid_save_then_resume_matches_an_uninterrupted_run(project, reference, tmp_path):
    root = project / "ck_kill"
    log = tmp_path / "killed.log"
    env = {"TRAIN_TEST_PAUSE_IN_SAVE": "10"}
    proc = start(project, 2, log, "--max-steps", "20", "--checkpoint-dir", "ck_kill", env=env)
    wait_for(proc, log, lambda text: "pausing inside the save of step 10" in text)
    kill_tree(proc, signal.SIGKILL)  # torchrun and the workers, in the middle of the save
    proc.wait(timeout=30)
    # Shards of step 10 are on disk in the temporary folder, but it was never committed.
    assert list((root / ".tmp-step_00000010").glob("*.distcp"))
    assert complete(root) == ["step_00000005"]
    assert not (root / "step_00000010").exists()

    recs, stderr = train(
        project, 2, "--max-steps", "20", "--checkpoint-dir", "ck_kill", exit_check=True
    )
    assert "resumed from" in stderr and "step_00000005" in stderr
    resumed = losses(recs)
    assert sorted(resumed) == list(range(6, 21))
    for step, value in resumed.items():
        assert abs(value - reference[step]) <= 1e-6, (step, value, reference[step])
    assert not list(root.glob(".tmp-*"))  # the interrupted save was cleaned up
    assert complete(root)[-1] == "step_00000020"


def test_sigterm_saves_and_exits_then_continues(project, reference, tmp_path):
    root = project / "ck_term"
    log = tmp_path / "term.log"
    proc = start(project, 2, log, "--max-steps", "1000", "--checkpoint-dir", "ck_term")
    wait_for(proc, log, lambda text: '"step": 3,' in text)
    os.kill(proc.pid, signal.SIGTERM)  # torchrun passes it on to every worker
    proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert "stop requested by a signal" in text, text[-3000:]
    # torchrun itself ends with its SignalException; no worker may fail
    assert "[rank0]: Traceback" not in text and "[rank1]: Traceback" not in text, text[-3000:]
    assert "ChildFailedError" not in text, text[-3000:]
    saved = complete(root)
    assert saved, text[-3000:]
    stopped_at = int(saved[-1].split("_")[1])
    assert stopped_at >= 3 and max(losses(records(text))) == stopped_at

    recs, stderr = train(
        project, 2, "--max-steps", str(stopped_at + 3), "--checkpoint-dir", "ck_term"
    )
    assert f"step {stopped_at}," in stderr
    resumed = losses(recs)
    assert sorted(resumed) == [stopped_at + 1, stopped_at + 2, stopped_at + 3]
    for step, value in resumed.items():
        if step in reference:  # same seed, world size and schedule: the same curve
            assert abs(value - reference[step]) <= 1e-6, (step, value, reference[step])


def test_slurm_time_limit_signal_saves_exits_and_requeues(project, tmp_path):
    """launch/torchrun.sh makes torchrun pass SIGUSR1 on (SLURM's warning before the limit);
    train.py saves, then asks SLURM to requeue the job (a recording scontrol on PATH)."""
    root = project / "ck_usr1"
    log, calls = tmp_path / "usr1.log", tmp_path / "scontrol.calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    scontrol.chmod(0o755)
    env = {"SLURM_JOB_ID": "4242", "PATH": str(bin_dir)}
    args = ("--max-steps", "1000", "--checkpoint-dir", "ck_usr1")
    proc = start(project, 2, log, *args, env=env, launcher="launch/torchrun.sh")
    wait_for(proc, log, lambda text: '"step": 2,' in text)
    os.kill(proc.pid, signal.SIGUSR1)  # only the launcher: it must forward the signal
    proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert "stop requested by a signal" in text, text[-3000:]
    assert "ChildFailedError" not in text, text[-3000:]
    saved = complete(root)
    assert saved and int(saved[-1].split("_")[1]) == max(losses(records(text)))
    assert calls.read_text().split("\n") == ["requeue 4242", ""]  # once, by rank 0
    assert "SLURM job 4242 requeued" in text


@pytest.mark.parametrize("nproc", [1, 4])
def test_checkpoint_from_world_size_2_resumes_at_another_size(project, reference, nproc):
    """The global batch of the first start is kept: 1 rank x 2 micro-batches of 4, or
    4 ranks x 1 of 2, take the same samples per step as 2 ranks x 4: the same curve."""
    name = f"ck_ws{nproc}"
    copy_checkpoint(project, "ck_ref", 10, name)
    recs, stderr = train(project, nproc, "--max-steps", "12", "--checkpoint-dir", name)
    assert "step_00000010 (step 10, world size 2)" in stderr
    split = {1: "1 ranks x 2 x 4", 4: "4 ranks x 1 x 2"}[nproc]
    assert f"global batch 8 = {split}" in stderr
    resumed = losses(recs)
    assert sorted(resumed) == [11, 12]
    for step, value in resumed.items():
        assert abs(value - reference[step]) < 1e-4, (step, value, reference[step])
    state = json.loads((project / name / "step_00000012" / "trainer_state.json").read_text())
    assert state["world_size"] == nproc and state["global_batch_size"] == 8
    assert state["data"]["consumed"] == 12 * 8


def test_global_batch_size_derives_the_accumulation(project, reference):
    """--global-batch-size 8 with micro-batches of at most 3 on 2 ranks: 2 micro-batches of
    2 per rank, the same samples per step as the reference's 1 of 4: the same training."""
    edit_config(project, {"data": {"micro_batch": 3}}, name="accum_config.json")
    args = ("--config", "accum_config.json", "--max-steps", "6", "--checkpoint-dir", "ck_accum")
    recs, stderr = train(project, 2, *args, "--global-batch-size", "8")
    assert "global batch 8 = 2 ranks x 2 x 2" in stderr
    for step, value in losses(recs).items():
        assert abs(value - reference[step]) < 1e-4, (step, value, reference[step])


def test_one_rank_with_the_same_global_batch_follows_the_same_curve(project, reference):
    """Same seed: the same initial weights and the same samples per step at any world size."""
    edit_config(project, {"train": {"global_batch_size": 8}}, name="ws1_config.json")
    args = ("--config", "ws1_config.json", "--max-steps", "5", "--checkpoint-dir", "ck_one")
    recs, stderr = train(project, 1, *args)
    assert "global batch 8 = 1 ranks x 2 x 4" in stderr
    for step, value in losses(recs).items():
        assert abs(value - reference[step]) < 1e-4, (step, value, reference[step])


@pytest.mark.parametrize(
    "options, settings, banner",
    [
        ({"precision": "fp16"}, {}, "FSDP2 fp16"),
        ({"cpu_offload": True}, {}, "FSDP2 bf16 + CPU offload"),
        ({"activation_checkpointing": True}, {}, "FSDP2 bf16 + activation checkpointing"),
        (
            {},
            {"fsdp": {"activation_checkpointing": "selective"}},
            "FSDP2 bf16 + selective activation checkpointing",
        ),
    ],
    ids=["fp16-scaler", "cpu-offload", "activation-checkpointing", "selective-ac"],
)
def test_variants_train(tmp_path, options, settings, banner):
    project = make_project(tmp_path / "proj", settings=settings, **options)
    recs, stderr = train(project, 2, "--max-steps", "6")
    assert banner in stderr
    recs = step_records(recs)
    assert [r["step"] for r in recs] == list(range(1, 7))
    assert all(math.isfinite(r["loss"]) and r["tokens_per_s"] > 0 for r in recs)
    assert recs[-1]["loss"] < recs[0]["loss"]
    assert complete(project / "checkpoints") == ["step_00000005", "step_00000006"]


PEAK = 1e9  # a made-up device peak, so that CPU runs report MFU


@pytest.fixture(scope="module")
def fsdp2_banner(project, reference, tmp_path_factory) -> tuple[str, list[dict]]:
    """The parameter count and MFU that FSDP2 reports for the tiny model (6 steps)."""
    edit_config(project, {"peak_flops": PEAK}, name="peak_config.json")
    args = ("--config", "peak_config.json", "--max-steps", "3", "--no-checkpoint")
    recs, stderr = train(project, 2, *args)
    return stderr, step_records(recs)


def test_fsdp1_trains_resumes_at_world_size_2_and_counts_like_fsdp2(tmp_path, fsdp2_banner):
    """FSDP1 with accumulation (no_sync on the first micro-batch) resumes at world size 2
    (two AdamW groups through set_state_dict), reports FSDP2's parameter count and MFU, and
    keeps the first start's schedule when --max-steps grows."""
    settings = {
        "optim": {"grad_accum": 2, "decay_steps": None, "min_lr_ratio": 0.5},
        "peak_flops": PEAK,
    }
    project = make_project(tmp_path / "proj", settings=settings, precision="fp32", fsdp_version=1)
    recs, stderr = train(project, 2, "--max-steps", "6", exit_check=True)
    assert "FSDP1 fp32" in stderr
    first = step_records(recs)
    assert [r["step"] for r in first] == list(range(1, 7)) and first[-1]["loss"] < first[0]["loss"]
    assert complete(project / "checkpoints") == ["step_00000005", "step_00000006"]

    recs, stderr = train(project, 2, "--max-steps", "8", exit_check=True)
    assert "resumed from" in stderr and "(step 6, world size 2)" in stderr
    assert "the schedule keeps its first start's length, 6 steps" in stderr
    resumed = step_records(recs)
    assert [r["step"] for r in resumed] == [7, 8]
    floor = 1e-2 * 0.5  # past the schedule's end: the minimum learning rate
    assert all(abs(r["lr"] - floor) < 1e-12 for r in resumed)

    fsdp2_stderr, fsdp2_recs = fsdp2_banner

    def parameters(text: str) -> str:
        return text.split(" parameters,")[0].rsplit(" ", 1)[1]

    assert parameters(stderr) == parameters(fsdp2_stderr) == "26,784"
    # MFU / tokens/s is FLOP/token / (peak x world): equal when both count the same FLOPs.
    ratios = {r["mfu"] / r["tokens_per_s"] for r in [*first, *fsdp2_recs]}
    assert max(ratios) / min(ratios) < 1 + 1e-9, ratios


def test_hsdp_on_a_2x2_mesh_trains_with_profiler_and_sinks(tmp_path):
    """4 ranks as 2 replicas x 2 shards, a profiler window, TensorBoard and W&B (offline)
    beside the JSON lines, and a CUDA-only switch that says it is ignored."""
    pytest.importorskip("torch.utils.tensorboard")
    settings = {
        "fsdp": {"replicate": 2},
        "profile": {"start_step": 2, "steps": 1, "memory_snapshot_steps": 2},
        "tracking": {"tensorboard": "tb", "wandb": "fsdp-test"},
    }
    project = make_project(tmp_path / "proj", settings=settings, precision="fp32")
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}
    if not _has("wandb"):
        edit_config(project, {"tracking": {"tensorboard": "tb", "wandb": None}})
    recs, stderr = train(project, 4, "--max-steps", "4", env=env, exit_check=True)
    assert "FSDP2 fp32 + HSDP on 4 x cpu" in stderr
    recs = step_records(recs)
    assert [r["step"] for r in recs] == [1, 2, 3, 4] and recs[-1]["loss"] < recs[0]["loss"]
    assert sorted(p.name for p in (project / "profile").glob("trace_*.json")) == [
        f"trace_step2_rank{r}.json" for r in range(4)
    ]
    assert "memory_snapshot_steps is ignored: CUDA only" in stderr
    assert list((project / "tb").glob("events.out.tfevents.*"))
    if _has("wandb"):
        assert list(tmp_path.glob("wandb/offline-run-*"))
    # The 2 x 2 checkpoint resumes on 2 ranks (plain FSDP) with the same global batch.
    edit_config(project, {"fsdp": {"replicate": 1}}, name="plain.json")
    resumed, stderr = train(project, 2, "--config", "plain.json", "--max-steps", "5", env=env)
    assert "(step 4, world size 4)" in stderr and [r["step"] for r in step_records(resumed)] == [5]


def test_compile_per_block_trains(tmp_path):
    """torch.compile of each block (inductor, CPU code): one rank, to bound the compile time."""
    project = make_project(tmp_path / "proj", settings={"fsdp": {"compile": True}})
    recs, stderr = train(project, 1, "--max-steps", "3", "--no-checkpoint")
    assert "FSDP2 bf16 + compile on 1 x cpu" in stderr
    recs = step_records(recs)
    assert [r["step"] for r in recs] == [1, 2, 3] and recs[-1]["loss"] < recs[0]["loss"]


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_starts_from_a_local_checkpoint_each_rank_reading_its_shards(tmp_path):
    """--model PATH: each rank reads only its rows of every tensor; a tied head stays tied."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(TINY_MODEL, tie_word_embeddings=True)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()  # tied: all logits 0, first loss ln(vocab)
    model.save_pretrained(tmp_path / "ckpt")
    project = make_project(tmp_path / "proj", model=str(tmp_path / "ckpt"), precision="fp32")
    edit_config(project, {"data": {"tokenizer": None}})
    recs, _ = train(project, 2, "--max-steps", "2")
    assert abs(step_records(recs)[0]["loss"] - math.log(TINY_MODEL["vocab_size"])) < 1e-5


def test_exit_path_leaves_no_gloo_thread_behind(tmp_path):
    """The abort at exit came from Gloo threads outliving the interpreter; run the exit path
    a few times (train, save, resume, exit) and check every rank, every time."""
    project = make_project(tmp_path / "proj", precision="fp32")
    for attempt in range(2):
        steps = str(2 * (attempt + 1))
        train(project, 2, "--max-steps", steps, "--checkpoint-every", "1", exit_check=True)
    assert complete(project / "checkpoints")[-1] == "step_00000004"


def test_lint_reports_nothing_on_the_generated_project(project):
    lint = pytest.importorskip("fsdp_skill.lint")
    files = [str(p) for p in sorted(project.rglob("*.py")) if "ck_" not in str(p)]
    report = lint.lint_paths(files)
    assert report["findings"] == [] and report["errors"] == [], report
    assert report["files"] == len(files)


def test_text_files_run_several_epochs_of_whole_steps(tmp_path):
    """22 sequences from two files on 2 ranks, 8 per step: 2 steps an epoch, 6 sit each out."""
    project = make_project(tmp_path / "proj", precision="fp32")
    text = "the quick brown fox jumps over the lazy dog, then again. yes, yes! "
    docs = [f"{i:02d} {text}" for i in range(10)]
    (project / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[:5]))
    (project / "b.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[5:]))
    edit_config(project, {"data": {"kind": "text", "path": "*.jsonl"}})
    tokens = sum(len(d.encode()) + 1 for d in docs)
    assert tokens // 32 == 22
    recs, _ = train(project, 2, "--max-steps", "8", "--checkpoint-every", "0")
    recs = step_records(recs)
    assert [r["step"] for r in recs] == list(range(1, 9))
    assert [r["epoch"] for r in recs] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert recs[-1]["loss"] < recs[0]["loss"]
