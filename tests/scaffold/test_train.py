"""The generated project trains for real on CPU (gloo): loss, crash safety, resume, variants.

One tiny Llama model, a few seconds per run. The reference run (world size 2, 20 steps,
checkpoints every 5) is shared by the tests that compare against it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_skill.scaffold import new_project
from tests.distributed import quiet_env, run_ranks

pytestmark = [pytest.mark.slow, pytest.mark.torch]
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY_MODEL = {
    "model_type": "llama",
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}
# Small and quick; the schedule's length is fixed so that runs of any length share it.
TEST_SETTINGS = {
    "data": {"seq_len": 32, "micro_batch": 4, "num_samples": 2000},
    "optim": {"lr": 1e-2, "warmup_steps": 2, "decay_steps": 100},
    "train": {"log_every": 1},
    "checkpoint": {"every": 5, "keep": 3},
}
TIMEOUT = 150


def make_project(dest: Path, **options) -> Path:
    """A project written by `new`, shrunk for tests (its fsdp section stays as rendered)."""
    model_config = dest.parent / f"{dest.name}-model.json"
    if "model" not in options:
        model_config.write_text(json.dumps(TINY_MODEL))
        options.setdefault("model_config", str(model_config))
    new_project(dest, **options)
    config_path = dest / "train_config.json"
    config = json.loads(config_path.read_text())
    for section, values in TEST_SETTINGS.items():
        config[section].update(values)
    config_path.write_text(json.dumps(config, indent=2))
    return dest


def records(stdout: str) -> list[dict]:
    """The --log-json lines of a run."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def train(project: Path, nproc: int, *args: str, env=None) -> tuple[list[dict], str]:
    """Run the project's train.py to completion; returns the step records and stderr."""
    proc = run_ranks(
        project / "train.py",
        nproc,
        ["--device", "cpu", "--log-json", *args],
        timeout=TIMEOUT,
        env=env,
        cwd=project,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return records(proc.stdout), proc.stderr


def start(
    project: Path, nproc: int, log: Path, *args: str, env=None, launcher: str | None = None
) -> subprocess.Popen:
    """Start train.py under torchrun in its own process group, stdout into ``log``.

    With ``launcher`` (a script of the project's launch/ folder), through that script.
    """
    if launcher:
        command = [str(project / launcher)]
        env = dict(env or {}, NPROC=str(nproc))
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += [f"--nproc_per_node={nproc}", str(project / "train.py")]
    command += ["--device", "cpu", "--log-json", *args]
    with open(log, "w") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=quiet_env(env),
            cwd=project,
            start_new_session=True,
        )


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc). torchrun puts each worker in a session
    of its own, so signalling torchrun's process group does not reach the workers."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            children = (task / "children").read_text().split() if task.exists() else []
            todo.extend(int(c) for c in children)
    return found


def kill_tree(proc: subprocess.Popen, sig: int) -> None:
    for pid in process_tree(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_for(proc: subprocess.Popen, log: Path, predicate, timeout: float = TIMEOUT) -> str:
    """Poll ``log`` until ``predicate(text)`` holds; fail if the run ends or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if predicate(text):
            return text
        if proc.poll() is not None:
            kill_tree(proc, signal.SIGKILL)
            pytest.fail(f"the run ended early ({proc.returncode}):\n{text[-3000:]}")
        time.sleep(0.2)
    kill_tree(proc, signal.SIGKILL)
    pytest.fail(f"timed out waiting:\n{log.read_text(errors='replace')[-3000:]}")


def losses(recs: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in recs}


def complete(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "COMPLETE").is_file())


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return make_project(tmp_path_factory.mktemp("scaffold") / "proj", precision="fp32")


@pytest.fixture(scope="module")
def reference(project) -> dict[int, float]:
    """An uninterrupted run: world size 2, 20 steps, checkpoints every 5 into ck_ref."""
    recs, _ = train(project, 2, "--max-steps", "20", "--checkpoint-dir", "ck_ref")
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

    recs, stderr = train(project, 2, "--max-steps", "20", "--checkpoint-dir", "ck_kill")
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


def test_sigusr1_through_the_launch_script_saves_and_exits(project, tmp_path):
    """launch/torchrun.sh makes torchrun pass SIGUSR1 on (SLURM's warning before the limit)."""
    root = project / "ck_usr1"
    log = tmp_path / "usr1.log"
    args = ("--max-steps", "1000", "--checkpoint-dir", "ck_usr1")
    proc = start(project, 2, log, *args, launcher="launch/torchrun.sh")
    wait_for(proc, log, lambda text: '"step": 2,' in text)
    os.kill(proc.pid, signal.SIGUSR1)  # only the launcher: it must forward the signal
    proc.wait(timeout=60)
    text = log.read_text(errors="replace")
    assert "stop requested by a signal" in text, text[-3000:]
    assert "ChildFailedError" not in text, text[-3000:]
    saved = complete(root)
    assert saved and int(saved[-1].split("_")[1]) == max(losses(records(text)))


@pytest.mark.parametrize("nproc", [1, 4])
def test_checkpoint_from_world_size_2_resumes_at_another_size(project, reference, nproc):
    name = f"ck_ws{nproc}"
    shutil.copytree(project / "ck_ref" / "step_00000010", project / name / "step_00000010")
    recs, stderr = train(project, nproc, "--max-steps", "12", "--checkpoint-dir", name)
    assert "step_00000010 (step 10, world size 2)" in stderr
    resumed = losses(recs)
    assert sorted(resumed) == [11, 12]
    # The restored model is the trained one: its loss is near the reference's at that step,
    # and far from the untrained model's (other samples, so not equal).
    assert abs(resumed[11] - reference[11]) < 0.25 * (reference[1] - reference[11])
    state = json.loads((project / name / "step_00000012" / "trainer_state.json").read_text())
    assert state["world_size"] == nproc
    assert state["data"]["consumed"] == 10 * 4 * 2 + 2 * 4 * nproc


@pytest.mark.parametrize(
    "options, banner, accumulate",
    [
        ({"precision": "fp16"}, "FSDP2 fp16", 1),
        ({"cpu_offload": True}, "FSDP2 bf16 + CPU offload", 1),
        ({"activation_checkpointing": True}, "FSDP2 bf16 + activation checkpointing", 1),
        ({"fsdp_version": 1}, "FSDP1 bf16", 2),  # also no_sync() on the first micro-batch
    ],
    ids=["fp16-scaler", "cpu-offload", "activation-checkpointing", "fsdp1"],
)
def test_variants_train(tmp_path, options, banner, accumulate):
    project = make_project(tmp_path / "proj", **options)
    config = json.loads((project / "train_config.json").read_text())
    config["optim"]["grad_accum"] = accumulate
    (project / "train_config.json").write_text(json.dumps(config))
    recs, stderr = train(project, 2, "--max-steps", "6")
    assert banner in stderr
    assert [r["step"] for r in recs] == list(range(1, 7))
    assert all(math.isfinite(r["loss"]) and r["tokens_per_s"] > 0 for r in recs)
    assert recs[-1]["loss"] < recs[0]["loss"]
    assert complete(project / "checkpoints") == ["step_00000005", "step_00000006"]


def test_starts_from_a_local_checkpoint(tmp_path):
    """--model PATH: rank 0 reads the weights; every rank gets its shards."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(TINY_MODEL)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # all logits 0: the first loss is exactly ln(vocab)
    model.save_pretrained(tmp_path / "ckpt")
    project = make_project(tmp_path / "proj", model=str(tmp_path / "ckpt"), precision="fp32")
    recs, _ = train(project, 2, "--max-steps", "2")
    assert abs(recs[0]["loss"] - math.log(TINY_MODEL["vocab_size"])) < 1e-5


def test_lint_reports_nothing_on_the_generated_project(project):
    lint = pytest.importorskip("fsdp_skill.lint")
    files = [str(p) for p in sorted(project.rglob("*.py")) if "ck_" not in str(p)]
    report = lint.lint_paths(files)
    assert report["findings"] == [] and report["errors"] == [], report
    assert report["files"] == len(files)


def test_text_file_with_a_short_last_batch_runs_several_epochs(tmp_path):
    """22 sequences on 2 ranks: 11 each, in batches of 4, 4 and 3 per epoch."""
    project = make_project(tmp_path / "proj", precision="fp32")
    text = "the quick brown fox jumps over the lazy dog, then again. yes, yes! "
    lines = [json.dumps({"text": f"{i:02d} {text}"}) for i in range(10)]
    (project / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    config_path = project / "train_config.json"
    config = json.loads(config_path.read_text())
    config["data"].update(kind="text", path="corpus.jsonl")
    config_path.write_text(json.dumps(config))
    tokens = sum(len(f"{i:02d} {text}".encode()) + 1 for i in range(10))
    assert tokens // 32 == 22
    recs, _ = train(project, 2, "--max-steps", "8", "--checkpoint-every", "0")
    assert [r["step"] for r in recs] == list(range(1, 9))
    assert [r["epoch"] for r in recs] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert recs[-1]["loss"] < recs[0]["loss"]


def test_gradient_accumulation_matches_the_larger_micro_batch(project, reference):
    """2 micro-batches of 2 take the same samples per rank as 1 of 4: the same training."""
    config = json.loads((project / "train_config.json").read_text())
    config["data"]["micro_batch"] = 2
    config["optim"]["grad_accum"] = 2
    (project / "accum_config.json").write_text(json.dumps(config))
    args = ("--config", "accum_config.json", "--max-steps", "6", "--checkpoint-dir", "ck_accum")
    recs, _ = train(project, 2, *args)
    for step, value in losses(recs).items():
        assert abs(value - reference[step]) < 1e-4, (step, value, reference[step])


def test_one_rank_with_the_same_global_batch_follows_the_same_curve(project, reference):
    """Same seed: the same initial weights and the same samples per step at any world size."""
    config = json.loads((project / "train_config.json").read_text())
    config["data"]["micro_batch"] = 8  # 1 rank x 8 = 2 ranks x 4
    (project / "ws1_config.json").write_text(json.dumps(config))
    args = ("--config", "ws1_config.json", "--max-steps", "5", "--checkpoint-dir", "ck_one")
    recs, _ = train(project, 1, *args)
    for step, value in losses(recs).items():
        assert abs(value - reference[step]) < 1e-4, (step, value, reference[step])
