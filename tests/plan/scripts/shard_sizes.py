"""Run under torchrun: shard small models with FSDP2 on CPU/gloo, take one AdamW step, and
print each rank's real parameter, gradient and optimizer-state bytes next to the planner's.

Output: one JSON line per model per rank, prefixed with ``RESULT``.
"""

import json
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoConfig, AutoModelForCausalLM

from fsdp_skill.plan import comm, memory
from fsdp_skill.plan.model import from_hf_config
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy

MODELS = {
    # vocabulary and widths not divisible by 4 so that dim-0 padding shows up
    "tiny-llama": dict(
        model_type="llama",
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1003,
    ),
    "small-llama": dict(
        model_type="llama",
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=4099,
    ),
    "tied-qwen2": dict(
        model_type="qwen2",
        hidden_size=96,
        intermediate_size=250,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        vocab_size=517,
        tie_word_embeddings=True,
    ),
    # fewer experts than ranks at world size 4: dim-0 sharding leaves some ranks without any
    "tiny-mixtral": dict(
        model_type="mixtral",
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        num_local_experts=2,
        num_experts_per_tok=1,
    ),
}


TRAFFIC = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}


def _count(kind, size_of, original):
    """Wrap a collective so it adds the bytes of the full (gathered / reduced) tensor."""

    def wrapper(*args, **kwargs):
        TRAFFIC[kind] += size_of(*args, **kwargs)
        return original(*args, **kwargs)

    return wrapper


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


dist.all_gather_single = _count(
    "all_gather", lambda out, *a, **k: _nbytes(out), dist.all_gather_single
)
dist.reduce_scatter_single = _count(
    "reduce_scatter",
    lambda *a, **k: _nbytes(k.get("input", a[1] if len(a) > 1 else None)),
    dist.reduce_scatter_single,
)
dist.all_reduce = _count("all_reduce", lambda t, *a, **k: _nbytes(t), dist.all_reduce)


def local_bytes(tensors) -> int:
    return sum(t.to_local().numel() * t.element_size() for t in tensors)


def runs(world: int):
    """(name, config, strategy base, nodes): every model fully sharded, plus HSDP on 2 x 2."""
    for name, raw in MODELS.items():
        yield name, raw, "full-shard", 1
    if world == 4:
        yield "tiny-llama-hsdp", MODELS["tiny-llama"], "hsdp", 2


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for name, raw, base, nodes in runs(world):
        raw = dict(raw)
        config = AutoConfig.for_model(raw.pop("model_type"), **raw)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config)
        if base == "hsdp":
            mesh = init_device_mesh("cpu", (nodes, world // nodes), mesh_dim_names=("r", "s"))
        else:
            mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ids = torch.randint(0, config.vocab_size, (2, 16))
        for kind in TRAFFIC:
            TRAFFIC[kind] = 0
        model(input_ids=ids, labels=ids).loss.backward()
        traffic = dict(TRAFFIC)
        optimizer.step()

        params = list(model.parameters())
        # what the rank holds: FSDP2 keeps each sharded parameter in a padded flat buffer
        param_storage = sum(p.to_local().untyped_storage().nbytes() for p in params)
        states = [
            v
            for s in optimizer.state.values()
            for k, v in s.items()
            if k != "step"  # a 0-dim CPU scalar per tensor, not a shard
        ]
        spec = from_hf_config(config.to_dict(), name)
        setup = Setup(
            spec=spec,
            gpus=world,
            nodes=nodes,
            gpu_memory=10**12,
            seq_len=16,
            micro_batch=2,
            precision="bf16",
            optimizer="adamw",
            attention="sdpa",
            headroom=0.1,
            reduce_dtype="fp32",
            intra_bandwidth=1e9,
            inter_bandwidth=1e9,
            bandwidth_assumed=True,
        )
        strategy = Strategy(base)
        planned = memory.estimate(setup, strategy)
        planned_comm = comm.estimate(setup, strategy)
        shard = world // nodes
        ring = (shard - 1) / shard
        row = {
            "model": name,
            "rank": rank,
            "world": world,
            "params_planned": planned.params,
            "params_storage": param_storage,
            "params_local": local_bytes(params),
            "grads_planned": planned.grads,
            "grads_local": local_bytes(p.grad for p in params),
            "optimizer_planned": planned.optimizer,
            "optimizer_local": local_bytes(states),
            "params_total": sum(p.numel() for p in params),
            "params_spec": spec.params,
            # bytes each rank sends, ring accounting, as the planner counts them
            "all_gather_sent": ring * traffic["all_gather"],
            "all_gather_planned": planned_comm.all_gather,
            "reduce_scatter_sent": ring * traffic["reduce_scatter"],
            "reduce_scatter_planned": planned_comm.reduce_scatter,
            "all_reduce_sent": 2 * (nodes - 1) / nodes * traffic["all_reduce"],
            "all_reduce_planned": planned_comm.all_reduce,
        }
        print("RESULT " + json.dumps(row), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
