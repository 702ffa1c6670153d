"""The step-time model: its terms on hand-checked cases, and its FLOP count against what
``torch.utils.flop_counter.FlopCounterMode`` counts in real Hugging Face models."""

from __future__ import annotations

import dataclasses

import pytest

from fsdp_skill.plan import step
from fsdp_skill.plan.model import from_hf_config
from fsdp_skill.plan.planner import build_setup, load_model
from fsdp_skill.plan.strategies import Strategy

LLAMA = dict(
    model_type="llama",
    hidden_size=128,
    intermediate_size=344,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1003,
)
MIXTRAL = dict(
    model_type="mixtral",
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_local_experts=4,
    num_experts_per_tok=2,
    vocab_size=500,
)
NEOX = dict(
    model_type="gpt_neox",
    hidden_size=64,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    vocab_size=500,
)
GPT2 = dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=500, n_positions=256)
SEQ, BATCH = 128, 2


def _setup(config=LLAMA, **kw):
    spec = from_hf_config(config)
    options = {"gpus": 8, "gpu_memory": "80GB", "seq_len": SEQ, "micro_batch": BATCH, **kw}
    return build_setup(spec, **options)


def test_step_is_the_sum_of_its_terms_and_tokens_follow():
    spec, _ = load_model(model="llama-3-8b")
    setup = build_setup(spec, gpus=8, gpu_memory="80GB")
    t = step.estimate(setup, Strategy("full-shard"))
    assert t.seconds == pytest.approx(t.compute + t.comm_exposed + t.optimizer)
    assert t.tokens_per_second == pytest.approx(8 * 4096 / t.seconds)
    # 6N + 12 x layers x width x sequence per token, at 40% of 989 TFLOP/s
    per_token = 6 * spec.matmul_params + 12 * 32 * 4096 * 4096
    assert t.flops == pytest.approx(4096 * per_token, rel=1e-9)
    assert t.compute == pytest.approx(t.flops / (0.4 * 989e12))
    assert t.comm_exposed <= t.comm  # overlap only hides


def test_checkpointing_adds_the_layers_forward():
    plain = step.train_flops(_setup(), checkpointing=False)
    ckpt = step.train_flops(_setup(), checkpointing=True)
    # three layers run forward again, all but their MLP's down projection
    down = 2 * SEQ * BATCH * 128 * 344
    assert ckpt.total - plain.total == pytest.approx(3 * (plain.layer_forward - down))
    assert 1.2 < ckpt.total / plain.total < 4 / 3  # nor is the head recomputed


def test_mfu_and_peak_scale_compute_only():
    base = step.estimate(_setup(), Strategy("full-shard"))
    half = step.estimate(_setup(mfu=0.2), Strategy("full-shard"))
    assert half.compute == pytest.approx(2 * base.compute)
    assert half.optimizer == base.optimizer
    a100 = step.estimate(_setup(gpu_flops="312TFLOPS"), Strategy("full-shard"))
    assert a100.compute == pytest.approx(base.compute * 989 / 312)


def test_offload_steps_the_shard_on_the_cpu_and_hsdp_doubles_it():
    spec, _ = load_model(model="llama-3-70b")
    setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB")
    full = step.estimate(setup, Strategy("full-shard", offload=True))
    hsdp = step.estimate(setup, Strategy("hsdp", offload=True))
    assert full.optimizer_on == "cpu" and full.optimizer_rate == step.CPU_ADAMW_RATE["fused"]
    assert full.optimizer == pytest.approx(spec.params / 16 / step.CPU_ADAMW_RATE["fused"])
    # HSDP shards within the node: each rank steps twice the parameters
    assert hsdp.optimizer == pytest.approx(2 * full.optimizer, rel=1e-3)
    # the per-tensor loop (torch < 2.4 has no fused CPU kernel) and a given rate
    loop = step.estimate(setup, Strategy("full-shard", offload=True), fused_cpu_step=False)
    assert loop.optimizer_rate == step.CPU_ADAMW_RATE["loop"]
    given = dataclasses.replace(setup, cpu_adam_rate=1e9)
    assert step.estimate(given, Strategy("full-shard", offload=True)).optimizer == (
        pytest.approx(spec.params / 16 / 1e9)
    )


def test_slow_links_show_and_fast_ones_hide():
    spec, _ = load_model(model="llama-3-8b")
    fast = build_setup(spec, gpus=8, gpu_memory="80GB", bandwidth="150GB/s")
    slow = build_setup(spec, gpus=8, gpu_memory="80GB", bandwidth="2GB/s")
    for base in ("full-shard", "no-reshard", "ddp"):
        quick = step.estimate(fast, Strategy(base))
        crawl = step.estimate(slow, Strategy(base))
        # what shows on a fast link: the first gathers and the last reductions (the root's
        # 1B embedding parameters are reduced after every layer)
        assert quick.comm_exposed < 0.10 * quick.compute, base
        assert crawl.comm_exposed > crawl.comm - crawl.compute, base  # compute hides at most itself
        assert crawl.seconds > quick.seconds
    # full shard gathers again in backward, so it shows more on a slow link
    assert (
        step.estimate(slow, Strategy("full-shard")).comm_exposed
        > step.estimate(slow, Strategy("no-reshard")).comm_exposed
    )


def test_lora_skips_frozen_weight_gradients():
    spec, _ = load_model(model="llama-2-7b")
    full = step.train_flops(build_setup(spec, gpus=8, gpu_memory="80GB"), False)
    lora = step.train_flops(build_setup(spec, gpus=8, gpu_memory="80GB", lora_rank=16), False)
    assert 0.65 < lora.total / full.total < 0.72  # 4N + attention instead of 6N


def test_moe_counts_only_the_routed_experts():
    spec = from_hf_config(MIXTRAL)
    assert spec.idle_expert_params == 2 * 3 * 96 * 64  # 2 of 4 experts idle per token
    norms = 2 * 64 * 2 + 64  # two per layer and the final one: added, not multiplied
    assert spec.matmul_params == spec.params - 500 * 64 - norms - 2 * spec.idle_expert_params


# --- against torch's FLOP counter ----------------------------------------------------------


def _counted(config: dict, checkpointing: bool = False, lora_rank: int = 0) -> float:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    raw = dict(config)
    cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), use_cache=False, **raw)
    cfg._attn_implementation = "eager"  # counted as matmuls (CPU SDPA kernels are not)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).train()
    if lora_rank:
        peft = pytest.importorskip("peft")
        lora = peft.LoraConfig(r=lora_rank, target_modules="all-linear", lora_dropout=0.0)
        model = peft.get_peft_model(model, lora)
    if checkpointing:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing,
        )

        inner = model.base_model.model if lora_rank else model
        layers = {"gpt2": "transformer.h", "gpt_neox": "gpt_neox.layers"}.get(
            config["model_type"], "model.layers"
        )
        layers = inner.get_submodule(layers)
        cls = type(layers[0])
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, cls))
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ))
    # torch 2.13's counter has no formula for the grouped matmul Mixtral's experts run:
    # (M, K) x (G, K, N) and (K, M) x (M, N) grouped along M both cost 2 M K N
    grouped = {torch.ops.aten._grouped_mm: lambda a, b, *args, **kw: 2 * a[0] * a[1] * b[-1]}
    with FlopCounterMode(display=False, custom_mapping=grouped) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize(
    "config, checkpointing",
    [
        (LLAMA, False),
        (LLAMA, True),
        (MIXTRAL, False),
        (MIXTRAL, True),
        (GPT2, False),
        (GPT2, True),
        (NEOX, False),
        (NEOX, True),
    ],
    ids=["llama", "llama+ac", "mixtral", "mixtral+ac", "gpt2", "gpt2+ac", "neox", "neox+ac"],
)
def test_flops_equal_torch_flop_counter(config, checkpointing):
    planned = step.train_flops(_setup(config), checkpointing).total
    counted = _counted(config, checkpointing)
    assert planned == pytest.approx(counted, rel=0.01), (planned, counted)


@pytest.mark.torch
def test_lora_flops_equal_torch_flop_counter():
    # 8 layers: the planner leaves out that the first layer's input needs no gradient
    deeper = {**LLAMA, "num_hidden_layers": 8}
    planned = step.train_flops(_setup(deeper, lora_rank=8), checkpointing=False).total
    assert planned == pytest.approx(_counted(deeper, lora_rank=8), rel=0.01)
