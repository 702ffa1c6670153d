"""Parts of the generated train.py in-process: data order, resume positions, option checks.

Imported in-process (no process group needed: the sampler is given its rank and world size).
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from fsdp_skill.scaffold import TEMPLATE_DIR

pytestmark = pytest.mark.torch
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("generated_train", TEMPLATE_DIR / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def streams(train, n: int, world: int, epoch: int = 0, start: int = 0) -> list[list[int]]:
    dataset = list(range(n))
    out = []
    for rank in range(world):
        sampler = train.ResumableSampler(dataset, world, rank, seed=7)
        sampler.set_epoch(epoch, start=start)
        out.append(list(sampler))
        assert len(sampler) == len(out[-1])
    return out


def interleave(per_rank: list[list[int]]) -> list[int]:
    """The global order back from the ranks' streams (rank r holds positions r, r+w, ...)."""
    return [x for group in zip(*per_rank, strict=True) for x in group]


@pytest.mark.parametrize("n", [1, 12, 13, 31])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_rank_gets_the_same_count_and_every_sample_is_seen(train, n, world):
    per_rank = streams(train, n, world)
    assert len({len(s) for s in per_rank}) == 1
    assert set(interleave(per_rank)) == set(range(n))


def test_the_global_order_does_not_depend_on_the_world_size(train):
    n = 24  # divisible by 1..4: no padding
    orders = {world: interleave(streams(train, n, world)) for world in (1, 2, 3, 4)}
    assert len({tuple(o) for o in orders.values()}) == 1
    assert orders[1] != sorted(orders[1])  # shuffled
    assert interleave(streams(train, n, 1, epoch=1)) != orders[1]  # reshuffled per epoch


@pytest.mark.parametrize("old, new", [(2, 2), (2, 1), (2, 4), (4, 3)])
def test_resuming_continues_the_epoch_where_it_stopped(train, old, new):
    n, batches_done, micro_batch = 37, 3, 2
    full = interleave(streams(train, n, old))
    start = batches_done * micro_batch * old  # samples consumed, as train.py counts them
    resumed = interleave(streams(train, n, new, start=start))
    if old == new:
        assert resumed == full[start:]
    # At another world size: the same remaining samples in the same order, then fewer than
    # `new` repeats that make the count divide by the new world size.
    remaining = n - start
    assert resumed[:remaining] == full[start:n]
    assert len(resumed) - remaining < new and len(resumed) % new == 0


@pytest.mark.parametrize(
    "override, message",
    [
        ({"data": {"micro_batch": 0}}, "data.micro_batch must be a positive integer"),
        ({"optim": {"grad_accum": 1.5}}, "optim.grad_accum must be a positive integer"),
        ({"checkpoint": {"keep": 0}}, "checkpoint.keep must be a positive integer"),
        ({"checkpoint": {"every": -1}}, "checkpoint.every must be an integer >= 0"),
        ({"optim": {"lr": 0}}, "optim.lr must be a positive number"),
        ({"fsdp": {"precision": "fp8"}}, "fsdp.precision"),
        ({"fsdp": {"version": 3}}, "fsdp.version"),
        ({"fsdp": {"sharding": "full"}}, "unknown config keys in 'fsdp'"),
        ({"trainer": {}}, "unknown config key 'trainer'"),
    ],
)
def test_nonsense_config_is_refused_with_one_line(train, tmp_path, override, message):
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps(override))
    with pytest.raises(SystemExit, match=message):
        train.load_options(train.parse_args(["--config", str(path), "--device", "cpu"]))


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
