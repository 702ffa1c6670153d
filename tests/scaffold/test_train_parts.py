"""Parts of the generated train.py in-process: data order, resume positions, option checks.

Imported in-process (no process group needed: the sampler is given its rank and world size).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from fsdp_skill.scaffold import TEMPLATE_DIR
from tests.scaffold.runs import write_jsonl

pytestmark = pytest.mark.torch
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def project():
    """The shipped project's modules (options, data, model...), imported from its folder."""
    names = ("options", "data", "model", "checkpoint", "tracking", "train", "prepare")
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(TEMPLATE_DIR))
    try:
        yield {n: importlib.import_module(n) for n in names}
    finally:
        sys.path.remove(str(TEMPLATE_DIR))
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)


@pytest.fixture(scope="module")
def train(project):
    """The sampler lives in data.py, the option checks in options.py."""

    class Parts:
        ResumableSampler = project["data"].ResumableSampler
        load_options = staticmethod(project["options"].load_options)
        parse_args = staticmethod(project["options"].parse_args)

    return Parts


def streams(
    train, n: int, world: int, epoch: int = 0, start: int = 0, step: int = 12
) -> list[list[int]]:
    dataset = list(range(n))
    out = []
    for rank in range(world):
        sampler = train.ResumableSampler(dataset, world, rank, seed=7, step_samples=step)
        sampler.set_epoch(epoch, start=start)
        out.append(list(sampler))
        assert len(sampler) == len(out[-1])
    return out


def interleave(per_rank: list[list[int]]) -> list[int]:
    """The global order back from the ranks' streams (rank r holds positions r, r+w, ...)."""
    return [x for group in zip(*per_rank, strict=True) for x in group]


@pytest.mark.parametrize("n", [12, 13, 31, 47])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_rank_gets_the_same_count_and_an_epoch_is_whole_steps(train, n, world):
    per_rank = streams(train, n, world, step=12)
    assert len({len(s) for s in per_rank}) == 1
    seen = interleave(per_rank)
    assert len(seen) == n // 12 * 12 and len(set(seen)) == len(seen)  # no sample twice


def test_the_global_order_does_not_depend_on_the_world_size(train):
    n = 31  # not a whole number of steps of 12: the cut is the same at every world size
    orders = {world: interleave(streams(train, n, world)) for world in (1, 2, 3, 4)}
    assert len({tuple(o) for o in orders.values()}) == 1
    assert orders[1] != sorted(orders[1])  # shuffled
    next_epoch = interleave(streams(train, n, 1, epoch=1))
    assert next_epoch != orders[1] and set(next_epoch) != set(orders[1])  # others left out


@pytest.mark.parametrize("old, new", [(2, 2), (2, 1), (2, 4), (4, 3)])
def test_resuming_at_any_world_size_continues_with_exactly_the_same_samples(train, old, new):
    n, steps_done, step = 37, 2, 12
    full = interleave(streams(train, n, old, step=step))
    start = steps_done * step  # samples consumed, as train.py counts them
    assert interleave(streams(train, n, new, start=start, step=step)) == full[start:]


def test_less_data_than_one_global_batch_is_a_config_error(project, train):
    with pytest.raises(project["options"].ConfigError, match="fewer than one global batch"):
        train.ResumableSampler(list(range(5)), 2, 0, seed=7, step_samples=8)


def _rank_batches(project, n: int, world: int, micro: int, step: int, state=None) -> list:
    from torch.utils.data import DataLoader

    data, dataset, out = project["data"], list(range(n)), []
    for rank in range(world):
        sampler = data.ResumableSampler(dataset, world, rank, seed=7, step_samples=step)
        batches = data.Batches(
            DataLoader(dataset, batch_size=micro, sampler=sampler), sampler, world
        )
        if state is not None:
            batches.load_state_dict(state)
        out.append(batches)
    return out


def _step_samples(ranks: list, per_rank_batches: int, steps: int) -> list[set[int]]:
    """The samples every rank together used in each of ``steps`` optimizer steps."""
    used = []
    for _ in range(steps):
        samples: set[int] = set()
        for _ in range(per_rank_batches):
            for batches in ranks:
                samples |= set(batches.next().tolist())
        used.append(samples)
    return used


def test_a_resume_at_another_world_size_crosses_the_epoch_end_like_the_first_run(project):
    n, step = 30, 8  # an epoch is 3 steps of 8 (24 of the 30 samples)
    uninterrupted = _step_samples(_rank_batches(project, n, 2, 2, step), 2, 5)
    first = _rank_batches(project, n, 2, 2, step)
    _step_samples(first, 2, 2)
    state = first[0].state_dict()
    assert state == {"epoch": 0, "consumed": 16}
    for world, micro in ((2, 2), (1, 4), (4, 1), (4, 2)):
        again = _rank_batches(project, n, world, micro, step, state)
        per_rank = step // (micro * world)
        assert _step_samples(again, per_rank, 3) == uninterrupted[2:], (world, micro)


@pytest.mark.parametrize(
    "override, message",
    [
        ({"data": {"micro_batch": 0}}, "data.micro_batch must be a positive integer"),
        ({"optim": {"grad_accum": 1.5}}, "optim.grad_accum must be a positive integer"),
        ({"checkpoint": {"keep": 0}}, "checkpoint.keep must be a positive integer"),
        ({"checkpoint": {"every": -1}}, "checkpoint.every must be an integer >= 0"),
        ({"optim": {"lr": 0}}, "optim.lr must be a positive number"),
        ({"optim": {"grad_clip": 0}}, "optim.grad_clip must be a positive number, or null"),
        ({"optim": {"grad_clip": -1}}, "optim.grad_clip must be a positive number, or null"),
        ({"optim": {"betas": [0.9]}}, r"optim.betas must be two numbers in \[0, 1\)"),
        ({"optim": {"min_lr_ratio": 5}}, "optim.min_lr_ratio must be a number from 0 to 1"),
        ({"fsdp": {"precision": "fp8"}}, "fsdp.precision"),
        ({"fsdp": {"version": 3}}, "fsdp.version"),
        ({"fsdp": {"replicate": 2, "version": 1}}, "fsdp.replicate must be 1 with fsdp.version 1"),
        ({"fsdp": {"activation_checkpointing": "some"}}, "fsdp.activation_checkpointing"),
        ({"fsdp": {"sharding": "full"}}, "unknown config keys in 'fsdp'"),
        ({"trainer": {}}, "unknown config key 'trainer'"),
        ({"data": {"kind": "tokens"}}, "data.path must be set for data.kind 'tokens'"),
        ({"data": {"val_fraction": 1}}, r"data.val_fraction must be a number in \[0, 1\)"),
        ({"checkpoint": {"best": True}}, "checkpoint.best must be false when eval.every is 0"),
        ({"train": {"global_batch_size": 0}}, "train.global_batch_size must be a positive"),
        ({"eval": "often"}, "eval must be an object"),
        ({"data": {"streaming": "yes"}}, "data.streaming must be true or false"),
        (
            {"data": {"kind": "tokens", "path": "t", "streaming": True}},
            "data.streaming must be false for data.kind 'tokens'",
        ),
        (
            {"data": {"kind": "hf", "path": "d", "streaming": True, "val_fraction": 0.1}},
            "data.val_fraction must be 0 with data.streaming",
        ),
        (
            {"data": {"kind": "hf", "path": "d", "streaming": True, "num_workers": 2}},
            "data.num_workers must be 0 with data.streaming",
        ),
    ],
)
def test_nonsense_config_is_refused_with_one_line_naming_file_and_key(
    train, tmp_path, override, message
):
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps(override))
    with pytest.raises(SystemExit, match=message) as raised:
        train.load_options(train.parse_args(["--config", str(path), "--device", "cpu"]))
    text = str(raised.value)
    assert text.startswith(f"{path}: ") and "\n" not in text


def test_grad_clip_null_means_no_clipping(train, tmp_path):
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps({"optim": {"grad_clip": None}}))
    cfg = train.load_options(train.parse_args(["--config", str(path), "--device", "cpu"]))
    assert cfg["optim"]["grad_clip"] is None


def test_malformed_config_names_the_line_and_column(train, tmp_path):
    path = tmp_path / "train_config.json"
    path.write_text('{"optim": {"lr": 0.1,}}')
    with pytest.raises(SystemExit, match=rf"^{path}:1:22: not valid JSON"):
        train.load_options(train.parse_args(["--config", str(path)]))


@pytest.fixture
def checked_main(project, monkeypatch):
    """train.main, stopped where the process group would start: a check that lets a bad
    value through fails the test instead of training."""

    def reached(cfg):
        raise AssertionError("the checks let it through to the process group")

    monkeypatch.setattr(project["train"], "setup_distributed", reached)
    monkeypatch.setenv("WORLD_SIZE", "2")
    return project["train"].main


def write_project(tmp_path, config: dict, model: dict | None = None):
    model = model or {"model_type": "llama", "vocab_size": 256, "hidden_size": 32,
                      "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                      "max_position_embeddings": 64}  # fmt: skip
    (tmp_path / "model_config.json").write_text(json.dumps(model))
    config = {"data": {"seq_len": 32}, **config}
    (tmp_path / "train_config.json").write_text(json.dumps(config))
    return ["--config", str(tmp_path / "train_config.json"), "--device", "cpu"]


@pytest.mark.parametrize(
    "config, files, message",
    [
        ({"data": {"seq_len": 128}}, {}, "data.seq_len 128 exceeds the model's max_position_embeddings 64"),
        ({"model": {"config": "missing.json"}}, {}, "model config .*missing.json not found"),
        (
            {"data": {"kind": "text", "path": "c.jsonl", "text_field": "txt", "seq_len": 32}},
            {"c.jsonl": '{"text": "hello"}\n'},
            r"c.jsonl:1: no text field 'txt' \(data.text_field in .*train_config.json\)",
        ),
        (
            {"data": {"kind": "text", "path": "nothing/*.txt", "seq_len": 32}},
            {},
            "data.path 'nothing/\\*.txt' matches no file",
        ),
        (
            {"model": {"config": None, "name_or_path": "./models/my-llama"}},
            {},
            "model.name_or_path ./models/my-llama: no such folder",
        ),
        (
            {"model": {"config": None, "name_or_path": "models/my-llama"}},
            {"models/readme.txt": "x"},
            "model.name_or_path models/my-llama: no such folder",
        ),
        ({"checkpoint": {"dir": "blocked/ck"}}, {"blocked": "a file"}, "checkpoint.dir .*cannot write"),
        ({"fsdp": {"replicate": 4}}, {}, "fsdp.replicate 4 does not divide the world size 2"),
        ({"eval": {"every": 5}}, {}, "eval.every needs validation data"),
        (
            {"train": {"global_batch_size": 7}},
            {},
            "train.global_batch_size 7 is not a multiple of the world size 2",
        ),
        (
            {"data": {"kind": "tokens", "path": "tok", "seq_len": 32}},
            {"tok/x": ""},
            "data.path 'tok' has no index.json",
        ),
    ],
    ids=[
        "seq-len", "no-model-config", "text-field", "no-files", "dot-path", "local-looking-id",
        "checkpoint-dir", "replicate", "no-validation", "global-batch", "no-index",
    ],
)  # fmt: skip
def test_bad_inputs_stop_before_any_compute(checked_main, tmp_path, config, files, message):
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content)
    args = write_project(tmp_path, config)
    with pytest.raises(SystemExit, match=message) as raised:
        checked_main(args)
    assert "\n" not in str(raised.value)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") and __import__("torch").cuda.is_available(),
    reason="this machine has CUDA",
)
def test_device_cuda_without_a_gpu_is_one_line(checked_main, tmp_path):
    args = write_project(tmp_path, {})
    args[-1] = "cuda"
    with pytest.raises(SystemExit, match="--device cuda: no CUDA device is visible"):
        checked_main(args)


def test_a_bad_value_exits_2_with_one_line_and_no_traceback(tmp_path):
    """The whole program, as a user runs it: `python train.py` with a bad value."""
    args = write_project(tmp_path, {"optim": {"grad_clip": 0}})
    proc = subprocess.run(
        [sys.executable, str(TEMPLATE_DIR / "train.py"), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"train.py: {tmp_path / 'train_config.json'}: optim.grad_clip")


@pytest.mark.parametrize(
    "global_batch, micro, world, expected",
    [
        (8, 4, 2, (4, 1)),
        (8, 4, 1, (4, 2)),
        (8, 4, 4, (2, 1)),
        (12, 4, 2, (3, 2)),
        (14, 4, 2, (1, 7)),
    ],
)
def test_micro_batches_split_the_global_batch(project, global_batch, micro, world, expected):
    size, accum = project["options"].micro_batches(global_batch, micro, world, "cfg")
    assert (size, accum) == expected and size <= micro and size * accum * world == global_batch


def test_token_shards_cut_sequences_within_each_shard(project, tmp_path):
    np = pytest.importorskip("numpy")
    shards = [np.arange(10, dtype="uint16"), np.arange(100, 107, dtype="uint16")]
    splits = {"train": []}
    for n, tokens in enumerate(shards):
        tokens.tofile(tmp_path / f"train-{n}.bin")
        splits["train"].append({"file": f"train-{n}.bin", "tokens": len(tokens)})
    index = {"format": 1, "dtype": "uint16", "vocab_size": 256, "splits": splits}
    (tmp_path / "index.json").write_text(json.dumps(index))
    data = project["data"].TokenShards(tmp_path, "train", 3)
    assert len(data) == 3 + 2
    assert [data[i].tolist() for i in range(5)] == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8], [100, 101, 102], [103, 104, 105],
    ]  # fmt: skip
    assert data[0].dtype.is_floating_point is False and str(data[0].dtype) == "torch.int64"


def test_validation_split_holds_out_the_last_sequences(project):
    data = project["data"]
    train_part, val_part = data.split_off(list(range(100)), 0.05)
    assert list(train_part) == list(range(95)) and list(val_part) == list(range(95, 100))


def test_prepare_cuts_jsonl_at_line_starts(project, tmp_path):
    prepare = project["prepare"]
    path = tmp_path / "c.jsonl"
    lines = [json.dumps({"text": "x" * n}) + "\n" for n in range(1, 40)]
    path.write_text("".join(lines))
    pieces = prepare.pieces(path, 100)
    assert len(pieces) > 3 and pieces[0][1] == 0 and pieces[-1][2] == path.stat().st_size
    starts = {0}
    for line in lines:
        starts.add(max(starts) + len(line.encode()))
    assert all(a in starts and b in starts for _, a, b in pieces)
    docs = [d for p in pieces for d in prepare.documents(*p, "text")]
    assert docs == ["x" * n for n in range(1, 40)]


def test_missing_config_is_refused(train, tmp_path):
    with pytest.raises(SystemExit, match="not found"):
        train.load_options(train.parse_args(["--config", str(tmp_path / "none.json")]))


def test_options_resolve_paths_against_the_config_file(train, tmp_path):
    path = tmp_path / "train_config.json"
    path.write_text("{}")
    args = ["--config", str(path), "--device", "cpu", "--max-steps", "7", "--seed", "3"]
    cfg = train.load_options(train.parse_args(args))
    assert cfg["checkpoint"]["dir"] == str(tmp_path / "checkpoints")
    assert cfg["train"]["max_steps"] == 7 and cfg["train"]["seed"] == 3
    assert cfg["checkpointing"] and cfg["device"] == "cpu"


# ---------------------------------------------------------------------------------------------
# A streamed Hugging Face dataset (data.streaming): order, shares, positions
# ---------------------------------------------------------------------------------------------

STREAM_DOCS = [f"document {i} " + "x" * (i % 7) for i in range(18)]
SEQ = 8


def write_stream(folder, docs: list[str]) -> None:
    """Three JSON-lines shards, ``train-0.jsonl`` .. ``train-2.jsonl``, in document order."""
    third = -(-len(docs) // 3)
    for part in range(3):
        write_jsonl(folder / f"train-{part}.jsonl", docs[part * third : (part + 1) * third])


@pytest.fixture
def stream(project, tmp_path):
    """Opens a PackedStream over STREAM_DOCS (datasets' streaming=True, bytes as tokens): one
    per simulated rank, as each rank of a run opens its own."""
    pytest.importorskip("datasets")
    write_stream(tmp_path / "stream", STREAM_DOCS)
    cfg = {
        "data": {"path": "stream", "text_field": "text", "seq_len": SEQ},
        "base_dir": str(tmp_path),
        "config_file": "cfg.json",
    }
    data = project["data"]
    return lambda: data.PackedStream(cfg, "train", data.Tokenizer(None), 256)


def packed(docs: list[str], epochs: int) -> list[list[int]]:
    """The global order by its definition: each epoch's documents (bytes, then EOS 0) joined
    and cut into SEQ-token sequences, the last partial one dropped."""
    tokens = [t for d in docs for t in [*d.encode(), 0]]
    one = [tokens[i : i + SEQ] for i in range(0, len(tokens) - SEQ + 1, SEQ)]
    return one * epochs


def global_rounds(batches: list, rounds: int) -> list[list[int]]:
    """``rounds`` micro-batches from every rank's StreamBatches, back in the global order."""
    out = []
    for _ in range(rounds):
        per_rank = [b.next().tolist() for b in batches]
        out += interleave(per_rank)
    return out


def test_a_stream_packs_documents_in_stored_order_epoch_after_epoch(project, stream, tmp_path):
    expected = packed(STREAM_DOCS, 3)
    first, source = [], stream()
    for sequence, position in source.sequences():
        first.append(sequence)
        assert 0 < position["used"]  # a sequence always ends inside a document
        if len(first) == len(expected):
            break
    assert first == expected
    assert [t.tolist() for t in source.head(5)] == expected[:5]
    assert len(source.head(10**6)) == len(expected) // 3  # one pass, not the next epoch

    write_stream(tmp_path / "short", ["tiny"])
    cfg = {"data": {"path": "short", "text_field": "text", "seq_len": SEQ}}
    cfg.update(base_dir=str(tmp_path), config_file="cfg.json")
    short = project["data"].PackedStream(cfg, "train", project["data"].Tokenizer(None), 256)
    with pytest.raises(SystemExit, match=r"short \(train\): fewer than data.seq_len=8 tokens"):
        next(short.sequences())


def test_a_saved_dataset_streams_from_its_arrow_files_in_the_same_order(project, tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = datasets.Dataset.from_dict({"text": STREAM_DOCS, "n": list(range(len(STREAM_DOCS)))})
    datasets.DatasetDict({"train": saved}).save_to_disk(str(tmp_path / "saved"))
    cfg = {"data": {"path": "saved", "text_field": "text", "seq_len": SEQ}}
    cfg.update(base_dir=str(tmp_path), config_file="cfg.json")
    data = project["data"]
    source = data.PackedStream(cfg, "train", data.Tokenizer(None), 256)
    assert [t.tolist() for t in source.head(10**6)] == packed(STREAM_DOCS, 1)


@pytest.mark.parametrize("new, micro", [(2, 4), (1, 4), (4, 2)])
def test_a_stream_gives_each_rank_its_share_and_resumes_at_any_world_size(
    project, stream, new, micro
):
    """World size 2, 4 sequences per rank per micro-batch (a global batch of 8), stopped after
    3 micro-batches; resumed from that position at ``new`` ranks (the global batch kept: 8 =
    ``new`` x micro x accumulation), the global order goes on with the next sequence: none
    repeated, none skipped, across the epoch's end."""
    data = project["data"]
    expected = packed(STREAM_DOCS, 4)
    per_epoch = len(expected) // 4
    assert 8 * 10 > per_epoch  # the runs below cross an epoch's end
    ranks = [data.StreamBatches(stream(), 4, rank, 2) for rank in range(2)]
    assert global_rounds(ranks, 3) == expected[:24]
    states = [b.state_dict() for b in ranks]
    assert states[0] == states[1] and states[0]["sequences"] == 24
    saved = json.loads(json.dumps(states[0]))  # as the checkpoint's trainer state holds it
    uninterrupted = [[b.next().tolist() for _ in range(7)] for b in ranks]

    resumed = [data.StreamBatches(stream(), micro, rank, new) for rank in range(new)]
    for b in resumed:
        b.load_state_dict(saved)
    rounds = 56 // (micro * new)
    assert global_rounds(resumed, rounds) == expected[24:80]
    assert resumed[0].state_dict()["sequences"] == 80
    assert resumed[0].epoch == 80 // per_epoch
    if new == 2:  # the same world size: every rank gets exactly what it would have
        again = [data.StreamBatches(stream(), 4, rank, 2) for rank in range(2)]
        for b in again:
            b.load_state_dict(saved)
        assert [[b.next().tolist() for _ in range(7)] for b in again] == uninterrupted
    with pytest.raises(SystemExit, match="data.streaming changed"):
        resumed[0].load_state_dict({"epoch": 0, "consumed": 24})


@pytest.mark.parametrize(
    "data, message",
    [
        ({"text_field": "body"}, r"stream \(train\): no column 'body'"),
        ({"val_split": "validation"}, r"data.path 'stream': Bad split: validation"),
    ],
)
def test_a_stream_is_checked_before_any_compute(checked_main, tmp_path, data, message):
    pytest.importorskip("datasets")
    write_stream(tmp_path / "stream", STREAM_DOCS)
    data = {"kind": "hf", "path": "stream", "streaming": True, "seq_len": 32, **data}
    args = write_project(tmp_path, {"data": data})
    with pytest.raises(SystemExit, match=message) as raised:
        checked_main(args)
    assert "\n" not in str(raised.value)
