"""Data at scale, evaluation and export in the generated project, trained for real on CPU.

Three sources, each trained once at world size 2 (module fixtures) and resumed from its middle
checkpoint at world sizes 2 (bit-exact), 1 and 4 (same global batch, same samples):
token shards written by prepare.py and memory-mapped, a Hugging Face `datasets` dataset
built here and saved to disk, and JSON-lines files read by `datasets` as a stream (nothing is
downloaded: HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed import quiet_env
from tests.scaffold.runs import (
    TINY_MODEL,
    complete,
    copy_checkpoint,
    losses,
    make_project,
    step_records,
    train,
    write_jsonl,
)

pytestmark = [pytest.mark.slow, pytest.mark.torch]
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

BYTE_MODEL = dict(TINY_MODEL, vocab_size=256, tie_word_embeddings=True)  # bytes are the tokens
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def corpus(n: int, seed: int) -> list[str]:
    """Documents of 20-60 words, deterministic."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) for _ in range(n)]


def run_script(project: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(project / script), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=quiet_env(OFFLINE),
    )


def project_module(project: Path, name: str):
    """Import one of the project's own modules (data, options...) in this process."""
    import importlib

    sys.path.insert(0, str(project))
    try:
        for mod in ("options", "data", "model", "checkpoint", "tracking"):
            sys.modules.pop(mod, None)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(project))


# ---------------------------------------------------------------------------------------------
# Token shards (prepare.py + memmap)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards_project(tmp_path_factory) -> Path:
    settings = {
        "data": {"kind": "tokens", "path": "tokens"},
        "eval": {"every": 5, "batches": 2, "prompt": "alpha beta", "max_new_tokens": 6},
        "checkpoint": {"every": 5, "keep": 3, "best": True},
    }
    project = make_project(
        tmp_path_factory.mktemp("shards") / "proj", BYTE_MODEL, settings, precision="fp32"
    )
    docs = corpus(240, seed=1)
    for part in range(3):  # several input files
        write_jsonl(project / f"corpus-{part}.jsonl", docs[part::3])
    prepared = run_script(
        project, "prepare.py", "--input", "corpus-*.jsonl", "--output", "tokens",
        "--val-fraction", "0.1", "--workers", "2", "--chunk-mb", "0.004",
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    return project


@pytest.fixture(scope="module")
def shards_run(shards_project) -> tuple[list[dict], str]:
    return train(shards_project, 2, "--max-steps", "10", env=OFFLINE)


def test_prepare_writes_shards_and_an_index_whatever_the_worker_count(shards_project):
    index = json.loads((shards_project / "tokens" / "index.json").read_text())
    assert index["dtype"] == "uint16" and index["vocab_size"] == 256
    docs = corpus(240, seed=1)
    total = sum(len(d.encode()) + 1 for d in docs)  # every document ends with EOS
    counts = {k: sum(s["tokens"] for s in v) for k, v in index["splits"].items()}
    assert counts["train"] + counts["val"] == total
    assert 0.03 < counts["val"] / total < 0.2
    assert len(index["splits"]["train"]) > 3  # the files were cut into pieces
    for shard in index["splits"]["train"]:
        size = (shards_project / "tokens" / shard["file"]).stat().st_size
        assert size == 2 * shard["tokens"]
    again = run_script(
        shards_project, "prepare.py", "--input", "corpus-*.jsonl", "--output", "tokens-1",
        "--val-fraction", "0.1", "--workers", "1", "--chunk-mb", "0.004",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    one = json.loads((shards_project / "tokens-1" / "index.json").read_text())
    assert one["splits"] == index["splits"]
    for shard in index["splits"]["train"]:
        a = (shards_project / "tokens" / shard["file"]).read_bytes()
        assert a == (shards_project / "tokens-1" / shard["file"]).read_bytes()
    assert "tokens" in again.stderr and "100%" in again.stderr  # the progress line
    refused = run_script(shards_project, "prepare.py", "--input", "x*.txt", "--output", "t2")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert not (shards_project / "t2").exists()


def test_shards_train_with_validation_sampling_and_best(shards_project, shards_run):
    recs, stderr = shards_run
    steps = step_records(recs)
    assert [r["step"] for r in steps] == list(range(1, 11))
    assert steps[-1]["loss"] < steps[0]["loss"]
    val = [r for r in recs if "val_loss" in r]
    assert [r["step"] for r in val] == [5, 10] and val[1]["val_loss"] < val[0]["val_loss"]
    assert stderr.count("sample: alpha beta") == 2
    best = shards_project / "checkpoints" / "best"
    state = json.loads((best / "trainer_state.json").read_text())
    assert state["step"] == 10 and abs(state["val_loss"] - val[1]["val_loss"]) < 1e-9
    assert (best / "COMPLETE").is_file()
    assert complete(shards_project / "checkpoints")[-1] == "step_00000010"


def resume_from_the_middle(project: Path, run: list[dict], middle: int, last: int, nproc: int):
    """Resume a copy of the ``middle`` checkpoint of ``run`` on ``nproc`` ranks; the loss
    curve must follow the uninterrupted run's: bit-exact at its world size (2), within 1e-4
    at another (the same samples per step, another reduction order)."""
    name = f"ck_ws{nproc}"
    copy_checkpoint(project, "checkpoints", middle, name)
    last = last if nproc == 2 else middle + 2
    recs, stderr = train(
        project, nproc, "--max-steps", str(last), "--checkpoint-dir", name, env=OFFLINE
    )
    assert f"(step {middle}, world size 2)" in stderr
    resumed, reference = losses(recs), losses(run)
    assert sorted(resumed) == list(range(middle + 1, last + 1))
    tolerance = 1e-6 if nproc == 2 else 1e-4
    for step, value in resumed.items():
        assert abs(value - reference[step]) <= tolerance, (step, value, reference[step])
    return recs


@pytest.mark.parametrize("nproc", [2, 1, 4])
def test_shards_resume_exactly_at_any_world_size(shards_project, shards_run, nproc):
    recs = resume_from_the_middle(shards_project, shards_run[0], 5, 10, nproc)
    if nproc == 2:  # the validation loss too
        val = {r["step"]: r["val_loss"] for r in recs if "val_loss" in r}
        ref = {r["step"]: r["val_loss"] for r in shards_run[0] if "val_loss" in r}
        assert abs(val[10] - ref[10]) <= 1e-6


def test_export_loads_with_from_pretrained_and_gives_the_trained_logits(shards_project, shards_run):
    """The best checkpoint, exported with save_pretrained, reproduces the validation loss the
    sharded model logged at that step; tied weights stay tied, and model.pt holds the same."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    done = run_script(
        shards_project, "export.py", "--checkpoint", "checkpoints/best", "--output", "hf"
    )
    assert done.returncode == 0, done.stderr
    model = AutoModelForCausalLM.from_pretrained(shards_project / "hf").eval()
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    with safe_open(str(shards_project / "hf" / "model.safetensors"), framework="pt") as f:
        assert "lm_head.weight" not in f.keys()  # stored once

    data = project_module(shards_project, "data")
    val = data.TokenShards(shards_project / "tokens", "val", 32)
    per_rank = min(len(val) // 2, 2 * 4)  # eval.batches x micro_batch, as train.py takes them
    batch = torch.stack([val[i] for i in range(per_rank * 2)])
    with torch.no_grad():
        loss = model(input_ids=batch, labels=batch).loss.item()
    logged = [r["val_loss"] for r in shards_run[0] if "val_loss" in r][-1]
    assert abs(loss - logged) < 1e-5, (loss, logged)

    done = run_script(
        shards_project, "export.py", "--checkpoint", "checkpoints/best", "--output", "pt",
        "--format", "torch",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    state = torch.load(shards_project / "pt" / "model.pt", weights_only=True)
    fresh = AutoModelForCausalLM.from_config(model.config).eval()
    fresh.load_state_dict(state)
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=batch).logits, model(input_ids=batch).logits)
    again = run_script(shards_project, "export.py", "--output", "hf")
    assert again.returncode == 2 and "exists" in again.stderr and again.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# Hugging Face datasets
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_project(tmp_path_factory) -> Path:
    datasets = pytest.importorskip("datasets")
    settings = {
        "data": {"kind": "hf", "path": "hfdata", "val_split": "validation", "text_field": "body"},
        "eval": {"every": 4, "batches": 2},
        "checkpoint": {"every": 4, "keep": 3},
    }
    project = make_project(
        tmp_path_factory.mktemp("hf") / "proj", BYTE_MODEL, settings, precision="fp32"
    )
    splits = {
        "train": datasets.Dataset.from_dict({"body": corpus(160, seed=2), "id": list(range(160))}),
        "validation": datasets.Dataset.from_dict({"body": corpus(30, seed=3), "id": [0] * 30}),
    }
    datasets.DatasetDict(splits).save_to_disk(str(project / "hfdata"))
    return project


@pytest.fixture(scope="module")
def hf_run(hf_project) -> tuple[list[dict], str]:
    return train(hf_project, 2, "--max-steps", "8", env=OFFLINE)


def trained_with_validation(recs: list[dict], steps: int, evaluated: list[int]) -> list[dict]:
    """The step records of a run that logged every step, whose loss fell, and that logged a
    validation loss at the ``evaluated`` steps."""
    logged = step_records(recs)
    assert [r["step"] for r in logged] == list(range(1, steps + 1))
    assert logged[-1]["loss"] < logged[0]["loss"]
    assert [r["step"] for r in recs if "val_loss" in r] == evaluated
    return logged


def test_hf_dataset_trains_and_logs_validation_loss(hf_run):
    trained_with_validation(hf_run[0], 8, [4, 8])


@pytest.mark.parametrize("nproc", [2, 1, 4])
def test_hf_dataset_resumes_exactly_at_any_world_size(hf_project, hf_run, nproc):
    resume_from_the_middle(hf_project, hf_run[0], 4, 8, nproc)


# ---------------------------------------------------------------------------------------------
# A Hugging Face dataset read as a stream (data.streaming)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stream_project(tmp_path_factory) -> Path:
    """Three JSON-lines shards small enough (41 sequences) that 8 steps of 8 sequences cross
    an epoch's end, and a validation file: datasets reads them with streaming=True."""
    pytest.importorskip("datasets")
    settings = {
        "data": {"kind": "hf", "path": "stream", "streaming": True, "val_split": "validation"},
        "eval": {"every": 4, "batches": 2},
        "checkpoint": {"every": 2, "keep": 3},
    }
    project = make_project(
        tmp_path_factory.mktemp("stream") / "proj", BYTE_MODEL, settings, precision="fp32"
    )
    docs = corpus(6, seed=4)
    for part in range(3):
        write_jsonl(project / "stream" / f"train-{part}.jsonl", docs[2 * part : 2 * part + 2])
    write_jsonl(project / "stream" / "validation.jsonl", corpus(12, seed=5))
    return project


@pytest.fixture(scope="module")
def stream_run(stream_project) -> tuple[list[dict], str]:
    return train(stream_project, 2, "--max-steps", "8", env=OFFLINE)


def test_streamed_dataset_trains_across_epochs_and_logs_validation_loss(stream_run):
    steps = trained_with_validation(stream_run[0], 8, [4, 8])
    assert steps[0]["epoch"] == 0 and steps[-1]["epoch"] == 1


@pytest.mark.parametrize("nproc", [2, 1, 4])
def test_streamed_dataset_resumes_exactly_at_any_world_size(stream_project, stream_run, nproc):
    """The losses follow the uninterrupted run's, and the data position saved at the end is
    the one the uninterrupted run saved at that step: the same sequences were read, none
    twice (at 1 and 4 ranks the resumed steps cross the epoch's end)."""
    resume_from_the_middle(stream_project, stream_run[0], 4, 8, nproc)
    last = 8 if nproc == 2 else 6
    name = f"step_{last:08d}"

    def position(folder: str) -> dict:
        state = stream_project / folder / name / "trainer_state.json"
        return json.loads(state.read_text())["data"]

    resumed, reference = position(f"ck_ws{nproc}"), position("checkpoints")
    assert resumed == reference and reference["sequences"] == 8 * last
