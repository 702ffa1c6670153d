"""Activation bytes per decoder layer against what autograd really saves (CPU, transformers).

Saved tensors are collected with ``torch.autograd.graph.saved_tensors_hooks`` and counted by
storage (a storage shared by several saved tensors counts once; parameters are left out).
The per-layer figure is the difference between a 2-layer and a 1-layer model.
"""

from __future__ import annotations

import pytest

from fsdp_skill.plan.activations import head_saved_bytes, layer_bytes
from fsdp_skill.plan.model import from_hf_config

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BATCH, SEQ = 2, 64
DTYPES = {2: torch.bfloat16, 4: torch.float32}


def _saved_bytes(config: dict, attention: str, dtype) -> int:
    raw = dict(config)
    cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    cfg._attn_implementation = attention
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(dtype).train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = max(
                storages.get(storage.data_ptr(), 0), storage.nbytes()
            )
        return t

    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(storages.values())


def _per_layer(config: dict, attention: str, dtype) -> int:
    key = "n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"
    one = _saved_bytes({**config, key: 1}, attention, dtype)
    two = _saved_bytes({**config, key: 2}, attention, dtype)
    return two - one


LLAMA = dict(
    model_type="llama",
    hidden_size=128,
    intermediate_size=344,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1000,
)
MISTRAL = {**LLAMA, "model_type": "mistral", "num_key_value_heads": 1}
WIDE_HEADS = {**LLAMA, "head_dim": 48}  # heads x head_dim != hidden
QWEN3 = {**LLAMA, "model_type": "qwen3", "head_dim": 48}
MIXTRAL = {**LLAMA, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}
GPT2 = dict(model_type="gpt2", n_embd=128, n_head=4, n_inner=512, vocab_size=1000, n_positions=512)
NEOX = dict(
    model_type="gpt_neox",
    hidden_size=128,
    intermediate_size=344,
    num_attention_heads=4,
    vocab_size=1000,
)


@pytest.mark.parametrize(
    ("config", "tolerance"),
    [
        (LLAMA, 0.01),
        (WIDE_HEADS, 0.01),
        (MISTRAL, 0.01),
        (QWEN3, 0.01),
        (MIXTRAL, 0.02),
        (NEOX, 0.01),
        (GPT2, 0.01),
    ],
    ids=["llama", "llama-wide-heads", "mistral", "qwen3", "mixtral", "gpt-neox", "gpt2"],
)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("c", [2, 4], ids=["bf16", "fp32"])
def test_layer_activation_bytes(config, tolerance, attention, c):
    measured = _per_layer(config, attention, DTYPES[c])
    key = "n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"
    spec = from_hf_config({**config, key: 1})
    planned = layer_bytes(spec, BATCH, SEQ, c, attention)
    assert abs(planned - measured) <= tolerance * measured, (planned, measured)


def test_eager_attention_grows_with_the_square_of_the_sequence():
    spec = from_hf_config({**LLAMA, "num_hidden_layers": 1})
    sdpa = [layer_bytes(spec, 1, s, 2, "sdpa") for s in (1024, 2048)]
    eager = [layer_bytes(spec, 1, s, 2, "eager") for s in (1024, 2048)]
    assert sdpa[1] == 2 * sdpa[0]
    assert eager[1] > 2.5 * eager[0]


@pytest.mark.parametrize("c", [2, 4], ids=["bf16", "fp32"])
@pytest.mark.parametrize("vocab", [1000, 3000])
def test_head_saved_bytes(c, vocab):
    """Everything but the decoder layers: final norm, head, loss (log-softmax in fp32)."""
    config = {**LLAMA, "vocab_size": vocab, "num_hidden_layers": 1}
    measured = _saved_bytes(config, "sdpa", DTYPES[c]) - _per_layer(config, "sdpa", DTYPES[c])
    planned = head_saved_bytes(from_hf_config(config), BATCH, SEQ, c)
    assert abs(planned - measured) <= 0.05 * measured, (planned, measured)
