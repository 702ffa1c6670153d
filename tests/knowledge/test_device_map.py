"""oom-debugging, 'device_map="auto" in one process': how transformers and Accelerate place a
model's layers on several GPUs, checked by placing a small model on four GPUs that need not
exist (the placement only reads sizes and the given ``max_memory``)."""

from __future__ import annotations

import inspect
import logging

import pytest

from tests.knowledge.texts import section

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
nn = pytest.importorskip("torch.nn")

SECTION = ("oom-debugging", 'device_map="auto" in one process')
GIB = 2**30


class Block(nn.Module):
    """A block that may not be split over two devices (a decoder layer's stand-in)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(256, 256), nn.Linear(256, 256)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(8))
        self.head = nn.Linear(256, 10)


@pytest.fixture(scope="module")
def model():
    from accelerate import init_empty_weights

    with init_empty_weights():
        return Net()


def _place(model, max_memory: dict, mode: str) -> dict:
    """``{device: number of blocks}`` (the head counted as ``"head"``) for ``mode``."""
    from accelerate import infer_auto_device_map
    from transformers.integrations.accelerate import get_balanced_memory

    if mode != "sequential":
        max_memory = get_balanced_memory(
            model, dict(max_memory), ["Block"], low_zero=mode == "balanced_low_0"
        )
    logging.getLogger("accelerate").setLevel(logging.ERROR)  # "device 0 is not available"
    placement = infer_auto_device_map(
        model, max_memory=max_memory, no_split_module_classes=["Block"]
    )
    found: dict = {}
    for name, device in placement.items():
        found.setdefault(device, []).append("head" if name == "head" else "block")
    return {device: sorted(kinds) for device, kinds in found.items()}


def test_auto_and_balanced_budget_the_weights_over_the_gpus_but_the_last(model):
    from transformers.integrations import accelerate as hf_accelerate

    sizes, _ = hf_accelerate.compute_module_sizes(model, None)
    budget = hf_accelerate.get_balanced_memory(model, {i: GIB for i in range(4)}, ["Block"])
    expected = sizes[""] // 4 + int(1.25 * sizes["layers.0"])  # the block outweighs any leaf
    assert budget == {0: expected, 1: expected, 2: expected, 3: GIB}
    source = inspect.getsource(hf_accelerate._get_device_map)
    assert 'if device_map != "sequential":' in source  # "auto" is "balanced"
    assert 'low_zero=(device_map == "balanced_low_0")' in source
    assert "The last device is left with max_memory" in inspect.getsource(
        hf_accelerate.get_balanced_memory
    )


def test_the_first_gpus_take_the_model_and_the_last_stays_empty(model):
    from accelerate.utils import modeling

    placed = _place(model, {i: GIB for i in range(4)}, "balanced")
    assert placed == {0: ["block"] * 2, 1: ["block"] * 3, 2: ["block"] * 3 + ["head"]}
    source = inspect.getsource(modeling.infer_auto_device_map)
    assert "current_max_size = current_max_size - max_layer_size" in source
    text = section(*SECTION)
    assert "land as 2, 3 and 3 blocks (the head with the last three) on GPUs 0 to 2" in text
    assert "and nothing on GPU 3" in text


def test_sequential_fills_gpu_0_and_balanced_low_0_spares_it(model):
    from accelerate import infer_auto_device_map

    logging.getLogger("accelerate").setLevel(logging.ERROR)
    whole = infer_auto_device_map(
        model, max_memory={i: GIB for i in range(4)}, no_split_module_classes=["Block"]
    )
    assert dict(whole) == {"": 0}  # the whole model, one entry, on GPU 0
    assert 0 not in _place(model, {i: GIB for i in range(4)}, "balanced_low_0")
    text = section(*SECTION)
    assert "lands entirely on GPU 0" in text
    assert '`"balanced_low_0"` keeps GPU 0 as empty as it can' in text
