"""The Hugging Face pitfalls' signatures match what the installed packages really raise.

``repro_hf_errors.py`` provokes each error under torchrun (two Gloo ranks, tiny models, no
downloads); a pitfall whose ``signature_source`` reads
``reproduced: tests/knowledge/repro_hf_errors.py (case NAME)`` must match the message of NAME.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from fsdp_skill import knowledge
from tests.distributed import run_ranks
from tests.knowledge.texts import flat
from tests.signatures import recognises

pytest.importorskip("accelerate")
pytest.importorskip("peft")

SCRIPT = Path(__file__).with_name("repro_hf_errors.py")
_CASES = re.compile(r"^reproduced: tests/knowledge/repro_hf_errors\.py \(cases? ([\w, ]+)\)$")
CLAIMS = [
    (p, case.strip())
    for p in knowledge.pitfalls()
    if (m := _CASES.match(p.signature_source or ""))
    for case in m.group(1).split(",")
]


@pytest.fixture(scope="module")
def messages(tmp_path_factory) -> dict[str, str]:
    result = run_ranks(
        SCRIPT, 2, timeout=240, env={"HF_HUB_OFFLINE": "1"}, cwd=tmp_path_factory.mktemp("hf")
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("MESSAGES ")), None)
    assert line, f"exit {result.returncode}\n{result.stderr[-3000:]}"
    return json.loads(line.removeprefix("MESSAGES "))


def test_the_hf_pitfalls_use_the_script():
    ids = {p.id for p, _ in CLAIMS}
    assert {
        "hf-wrap-class-not-found",
        "qlora-integer-dtype-flatten",
        "generate-on-sharded-params",
    } <= ids


@pytest.mark.slow
@pytest.mark.parametrize("pitfall,case", CLAIMS, ids=[f"{p.id}-{c}" for p, c in CLAIMS])
def test_signature_matches_the_reproduced_error(pitfall, case, messages):
    assert messages.get(case), f"{case}: nothing was raised"
    text = messages[case]
    assert recognises(pitfall, text), f"{pitfall.id}: no signature matches {text!r}"


def test_accelerate_refuses_fsdp_without_a_dimension_to_shard():
    """Accelerate's own check for a parallelism config that gives every rank to tensor
    parallelism under FSDP: the device-mesh pitfall quotes its message."""
    from types import SimpleNamespace

    from accelerate.parallelism_config import ParallelismConfig

    accelerator = SimpleNamespace(
        multi_device=True, num_processes=2, is_fsdp2=True, distributed_type="FSDP"
    )
    with pytest.raises(ValueError) as raised:
        ParallelismConfig(tp_size=2)._validate_accelerator(accelerator)
    pitfall = knowledge.pitfall("device-mesh-slice-unknown-name")
    assert recognises(pitfall, str(raised.value)), str(raised.value)


def test_accelerate_converts_strategy_names_but_not_ints():
    """fsdp1-sharding-strategy-as-string: what Accelerate's FSDP1 plugin converts itself."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import ShardingStrategy

    def strategy(value):
        return FullyShardedDataParallelPlugin(
            fsdp_version=1, sharding_strategy=value
        ).sharding_strategy

    assert strategy("FULL_SHARD") is ShardingStrategy.FULL_SHARD
    assert strategy("2") is ShardingStrategy.SHARD_GRAD_OP
    assert strategy(3) == 3 and not isinstance(strategy(3), ShardingStrategy)


def test_resize_token_embeddings_resizes_by_the_mean_unless_told_not_to():
    """resize-embeddings-after-sharding: the default that computes the old rows' mean (the
    `.item()` on meta weights, the covariance check on DTensors), and the switch the fix names."""
    from transformers import PreTrainedModel

    resize = inspect.signature(PreTrainedModel.resize_token_embeddings).parameters
    assert resize["mean_resizing"].default is True


def test_from_pretrained_takes_a_memory_cap_per_device():
    """oom-debugging, 'GPUs of different memory sizes': the per-GPU cap the section shows."""
    from transformers import PreTrainedModel

    source = inspect.getsource(PreTrainedModel.from_pretrained)
    assert 'max_memory = kwargs.pop("max_memory", None)' in source
    assert "max_memory (`Dict`, *optional*)" in source


def _release(module) -> str:
    """``major.minor`` of an installed package, as the knowledge names versions."""
    return ".".join(module.__version__.split(".")[:2])


def test_peft_loads_adapters_frozen_unless_told_to_train():
    """ddp-module-without-trainable-parameters: the default that leaves DDP nothing to do."""
    import peft

    load = inspect.signature(peft.PeftModel.from_pretrained).parameters
    assert load["is_trainable"].default is False
    pitfall = knowledge.pitfall("ddp-module-without-trainable-parameters")
    assert f"defaults to `False` (peft {_release(peft)})" in flat(pitfall.cause)


def test_accelerate_prepares_an_fsdp2_model_only_with_its_optimizer():
    """accelerate-fsdp2-prepare-model-alone: Accelerate's check, and the Trainer path that
    prepares the model alone when evaluation comes first."""
    import accelerate
    import transformers
    from accelerate import Accelerator
    from transformers import Trainer

    prepare = inspect.getsource(Accelerator.prepare)
    assert "When using FSDP2, a model and optimizer must be passed together" in prepare
    assert "(model_count > 0 and optimizer_count < 1)" in prepare
    evaluation = inspect.getsource(Trainer.evaluation_loop)
    assert "if len(self.accelerator._models) == 0 and model is self.model:" in evaluation
    assert "self.accelerator.prepare(model)" in evaluation
    cause = flat(knowledge.pitfall("accelerate-fsdp2-prepare-model-alone").cause)
    assert f"(transformers {_release(transformers)}, accelerate {_release(accelerate)})" in cause


def test_the_version_skew_pitfall_names_what_is_installed():
    """hf-accelerate-version-skew: the plugin of the installed accelerate has the attribute
    transformers 4.35 read and not the method 4.30 called, and the stated minimum is mined."""
    import dataclasses

    import accelerate.utils
    import transformers
    from accelerate.utils import FullyShardedDataParallelPlugin
    from transformers.utils.import_utils import ACCELERATE_MIN_VERSION

    fields = {f.name for f in dataclasses.fields(FullyShardedDataParallelPlugin)}
    assert "activation_checkpointing" in fields
    assert not hasattr(FullyShardedDataParallelPlugin, "save_model")
    assert callable(accelerate.utils.save_fsdp_model)
    fix = flat(knowledge.pitfall("hf-accelerate-version-skew").fix)
    assert f"({ACCELERATE_MIN_VERSION} for transformers {_release(transformers)})" in fix
