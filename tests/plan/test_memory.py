"""The memory and communication formulas on hand-checked cases."""

from __future__ import annotations

import pytest

from fsdp_skill.plan import comm, memory
from fsdp_skill.plan.model import from_hf_config
from fsdp_skill.plan.planner import build_setup, load_model
from fsdp_skill.plan.strategies import Strategy, candidates

TINY = dict(
    model_type="llama",
    hidden_size=64,
    intermediate_size=172,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1003,
)


def test_shard_numel_pads_each_tensor_to_whole_rows():
    # 1003 rows over 4 ranks: the first ranks hold 251 rows; 64 rows split evenly
    assert memory.shard_numel(((1003, 64), (64,)), 4) == 251 * 64 + 16
    assert memory.shard_numel(((2, 10, 10),), 4) == 100  # 2 experts, 4 ranks: 1 each at most
    assert memory.shard_numel(((8, 8),), 1) == 64


def test_model_shard_is_even_share_for_a_bare_count():
    spec, _ = load_model(params="7b")
    assert memory.model_shard_numel(spec, 8) == 7_000_000_000 // 8


def _setup(**kw):
    spec = from_hf_config(TINY)
    return build_setup(spec, **{"gpus": 4, "gpu_memory": "80GB", "seq_len": 128, **kw})


def test_peak_is_the_largest_phase_and_fsdp_grads_wait_for_backward():
    setup = _setup()
    fsdp = memory.estimate(setup, Strategy("full-shard"))
    ddp = memory.estimate(setup, Strategy("ddp"))
    assert fsdp.total == max(fsdp.phases.values())
    # backward starts before any FSDP gradient exists; DDP's buckets are always there
    start = fsdp.params + fsdp.optimizer + fsdp.acts.at_loss_backward + fsdp.buffers_at_start
    assert fsdp.phases["loss_backward"] == start
    assert ddp.phases["loss_backward"] == (
        ddp.params + ddp.grads + ddp.optimizer + ddp.acts.at_loss_backward + ddp.buffers_at_start
    )
    assert fsdp.phases["optimizer_step"] == (
        fsdp.params + fsdp.grads + fsdp.optimizer + fsdp.optimizer_step + fsdp.acts.logits
    )


def test_checkpointing_trades_stored_layers_for_one_recomputed():
    plain = memory.estimate(_setup(), Strategy("full-shard")).acts
    ckpt = memory.estimate(_setup(), Strategy("full-shard", checkpointing=True)).acts
    assert ckpt.layers < plain.layers and ckpt.recompute == plain.layers // 2  # 2 layers
    assert plain.recompute == 0


def test_adam_step_temporary_and_sgd_in_place():
    adam = memory.estimate(_setup(), Strategy("full-shard"))
    sgd = memory.estimate(_setup(optimizer="sgd"), Strategy("full-shard"))
    assert adam.optimizer_step == adam.params  # one fp32 temporary per parameter
    assert adam.optimizer == 2 * adam.params and sgd.optimizer == sgd.params
    assert sgd.optimizer_step == 0


def test_offload_moves_states_to_cpu_per_node():
    setup = _setup(gpus=8, nodes=2)
    on_gpu = memory.estimate(setup, Strategy("full-shard"))
    off = memory.estimate(setup, Strategy("full-shard", offload=True))
    assert off.params == off.grads == off.optimizer == 0
    assert off.cpu_per_rank == on_gpu.params + on_gpu.grads + on_gpu.optimizer
    assert off.cpu_per_node == 4 * off.cpu_per_rank


def test_ring_volumes():
    spec, _ = load_model(params="8b")
    setup = build_setup(spec, gpus=8, gpu_memory="80GB", bandwidth="100GB/s")
    n, ring = spec.params, 7 / 8
    ddp = comm.estimate(setup, Strategy("ddp"))
    assert ddp.all_reduce == pytest.approx(2 * ring * 4 * n)
    assert ddp.seconds == pytest.approx(ddp.all_reduce / 100e9)
    full = comm.estimate(setup, Strategy("full-shard"))
    once = comm.estimate(setup, Strategy("no-reshard"))
    assert once.all_gather == pytest.approx(ring * 2 * n)  # bf16, forward only
    # backward gathers again everything but the root, which stays unsharded
    assert full.all_gather == pytest.approx(ring * 2 * (2 * n - spec.root_params))
    assert full.reduce_scatter == once.reduce_scatter == pytest.approx(ring * 4 * n)


def test_hsdp_reduces_inside_nodes_and_all_reduces_across():
    spec, _ = load_model(params="8b")
    setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB")
    hsdp = comm.estimate(setup, Strategy("hsdp"))
    shard = memory.model_shard_numel(spec, 8)
    assert hsdp.all_reduce == pytest.approx(2 * 0.5 * 4 * shard)
    assert hsdp.reduce_scatter == pytest.approx(7 / 8 * 4 * spec.params)


def test_candidates():
    names = {s.name for s in candidates(1)}
    assert "fsdp2-hsdp" not in names and "ddp+offload" not in names
    assert len(names) == 10
    assert len(candidates(2)) == 14
    assert all(s.checkpointing for s in candidates(2, checkpointing_only=True))
