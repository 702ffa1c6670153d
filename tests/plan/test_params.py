"""Parameter counts and shapes from configs against the transformers models themselves."""

from __future__ import annotations

import math

import pytest

from fsdp_skill.plan import bundled
from fsdp_skill.plan.model import from_hf_config

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _meta_model(config: dict):
    raw = dict(config)
    cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(cfg)


def _unique_numel(model) -> int:
    # tied weights are one Parameter: count each once
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", bundled.names())
def test_bundled_count_is_exact(name):
    config = bundled.load(name)
    spec = from_hf_config(config, name)
    assert spec.params == _unique_numel(_meta_model(config))


@pytest.mark.parametrize("name", bundled.names())
def test_layer_shapes_match(name):
    """The shapes of one decoder layer (what FSDP shards on dim 0) are the model's own."""
    config = dict(bundled.load(name))
    layers_key = "n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"
    config[layers_key] = 1
    model = _meta_model(config)
    spec = from_hf_config(config, name)
    layer = next(m for n, m in model.named_modules() if n.endswith(("layers.0", "h.0")))
    real = sorted(tuple(p.shape) for p in layer.parameters())
    assert real == sorted(spec.layer_tensors)
    root = sorted(
        tuple(p.shape)
        for n, p in model.named_parameters()
        if ".layers.0." not in n and ".h.0." not in n
    )
    assert root == sorted(spec.root_tensors)
    assert spec.layer_params == sum(math.prod(s) for s in real)


@pytest.mark.parametrize(
    "config",
    [
        dict(
            model_type="llama",
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=100,
            attention_bias=True,
            mlp_bias=True,
        ),
        dict(
            model_type="qwen3",
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            vocab_size=100,
            tie_word_embeddings=True,
        ),
        dict(
            model_type="qwen3",
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=100,
        ),
        dict(
            model_type="gpt2",
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_inner=200,
            vocab_size=100,
            n_positions=32,
            tie_word_embeddings=False,
        ),
        dict(
            model_type="gpt_neox",
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            vocab_size=100,
            attention_bias=False,
            tie_word_embeddings=True,
        ),
        dict(
            model_type="mixtral",
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=100,
            num_local_experts=3,
            num_experts_per_tok=2,
        ),
    ],
    ids=[
        "llama-biases",
        "qwen3-tied",
        "qwen3-default-head-dim",
        "gpt2-untied",
        "neox-nobias-tied",
        "mixtral-3experts",
    ],
)
def test_config_options_counted(config):
    assert from_hf_config(config).params == _unique_numel(_meta_model(config))
