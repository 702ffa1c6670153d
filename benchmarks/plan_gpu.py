"""Measured vs planned peak GPU memory of one training step, on one CUDA device.

For a few Llama-style models (transformers ``LlamaForCausalLM``, random weights) and the
strategies that run on one GPU (DDP, FSDP2 full shard, without resharding, with activation
checkpointing, with CPU offload), runs training steps (bf16 compute, fp32 master weights,
AdamW), measures ``torch.cuda.max_memory_allocated`` over a steady-state step and prints it
next to ``fsdp-skill plan``'s per-GPU total, with the error.

    python benchmarks/plan_gpu.py                # a few minutes on one GPU
    python benchmarks/plan_gpu.py --time-limit 120 --models llama-150m
    python benchmarks/plan_gpu.py --cpu-smoke    # exercise the code on CPU, measure nothing

Without a CUDA device (and without --cpu-smoke) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
import time

MODELS = {
    "llama-tiny": dict(
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
    ),
    "llama-150m": dict(
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=4,
        vocab_size=32000,
    ),
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=32000,
    ),
    "llama-3b": dict(
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=26,
        num_attention_heads=24,
        num_key_value_heads=8,
        vocab_size=32000,
    ),
}
STRATEGIES = (
    "ddp",
    "fsdp2-full-shard",
    "fsdp2-no-reshard",
    "fsdp2-full-shard+ac",
    "fsdp2-full-shard+offload",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build(torch, config: dict, strategy: str, device):
    """The model on ``device`` with ``strategy`` applied, and its optimizer."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from torch.nn.parallel import DistributedDataParallel
    from transformers import AutoConfig, LlamaForCausalLM

    cfg = AutoConfig.for_model("llama", **config)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    offload = "+offload" in strategy
    with torch.device("cpu" if offload else device):
        model = LlamaForCausalLM(cfg)
    if "+ac" in strategy:  # as the planner's snippet does it
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing,
        )

        layer_cls = type(model.model.layers[0])
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, layer_cls))
    if strategy == "ddp":
        model = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            gradient_as_bucket_view=True,
        )
    else:
        mesh = init_device_mesh(device.type, (1,))
        kwargs = {
            "mesh": mesh,
            "mp_policy": MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            ),
        }
        if offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        for layer in model.model.layers:
            fully_shard(layer, reshard_after_forward="no-reshard" not in strategy, **kwargs)
        fully_shard(model, **kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer


def _step(torch, model, optimizer, ids, strategy: str, device) -> None:
    # The usual Hugging Face loop: the outputs (and their logits) stay referenced in backward.
    if strategy == "ddp":
        with torch.autocast(device.type, dtype=torch.bfloat16):
            outputs = model(input_ids=ids, labels=ids)
    else:
        outputs = model(input_ids=ids, labels=ids)
    outputs.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del outputs


def _planned(config: dict, strategy: str, seq: int, batch: int) -> int:
    from fsdp_skill.plan import plan

    result = plan(
        model_config={"model_type": "llama", **config},
        gpus=1,
        gpu_memory="10TB",
        seq_len=seq,
        micro_batch=batch,
    )
    row = next(s for s in result["strategies"] if s["name"] == strategy)
    return row["per_gpu_bytes"]["total"]


def measure(torch, config, strategy, seq, batch, device) -> int | None:
    """Peak bytes allocated during one steady-state step (None on CPU)."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
    model, optimizer = _build(torch, config, strategy, device)
    ids = torch.randint(0, config["vocab_size"], (batch, seq), device=device)
    _step(torch, model, optimizer, ids, strategy, device)  # creates the optimizer states
    peak = None
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    _step(torch, model, optimizer, ids, strategy, device)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    del model, optimizer, ids
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama-150m,llama-1b,llama-3b")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=240, help="seconds; skip the rest")
    parser.add_argument("--cpu-smoke", action="store_true", help="run on CPU, measure nothing")
    args = parser.parse_args(argv)
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available() and not args.cpu_smoke:
        print("no CUDA device: nothing to measure (use --cpu-smoke to exercise the code on CPU)")
        return 0
    models = [m for m in args.models.split(",") if m]
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = [m for m in models if m not in MODELS] + [
        s for s in strategies if s not in STRATEGIES
    ]
    if unknown:
        print(f"unknown model or strategy: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.cpu_smoke:
        device, backend = torch.device("cpu"), "gloo"
        strategies = [s for s in strategies if "+offload" not in s]
    else:
        device, backend = torch.device("cuda", 0), "nccl"
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group(backend, rank=0, world_size=1)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (smoke run)"
    print(
        f"device: {name}; torch {torch.__version__}; seq {args.seq_len} x micro-batch "
        f"{args.micro_batch}; bf16 compute, fp32 master, AdamW"
    )
    header = f"{'model':<12} {'strategy':<26} {'planned GB':>10} {'measured GB':>11} {'error':>7}"
    print(header)
    print("-" * len(header))
    start, errors, skipped = time.monotonic(), [], 0
    for model_name in models:
        for strategy in strategies:
            if time.monotonic() - start > args.time_limit:
                skipped += 1
                continue
            config = MODELS[model_name]
            planned = _planned(config, strategy, args.seq_len, args.micro_batch)
            try:
                measured = measure(torch, config, strategy, args.seq_len, args.micro_batch, device)
            except torch.OutOfMemoryError:
                gc.collect()
                torch.cuda.empty_cache()
                print(f"{model_name:<12} {strategy:<26} {planned / 1e9:>10.2f} {'OOM':>11}")
                continue
            if measured is None:
                print(f"{model_name:<12} {strategy:<26} {planned / 1e9:>10.2f} {'-':>11} {'-':>7}")
                continue
            error = (planned - measured) / measured
            errors.append(abs(error))
            print(
                f"{model_name:<12} {strategy:<26} {planned / 1e9:>10.2f} "
                f"{measured / 1e9:>11.2f} {error:>+7.1%}"
            )
    if errors:
        print(
            f"mean |error| {sum(errors) / len(errors):.1%}, worst {max(errors):.1%} "
            f"over {len(errors)} runs (positive: the plan is above the measurement)"
        )
    if skipped:
        print(f"{skipped} run(s) skipped: over --time-limit {args.time_limit:.0f}s")
    print(f"took {time.monotonic() - start:.0f}s")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
