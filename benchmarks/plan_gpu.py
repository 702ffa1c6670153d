"""Measured vs planned peak memory of one training step, on one CUDA device (or the CPU).

For a few Llama-style models (transformers ``LlamaForCausalLM``, random weights) and the
strategies that run on one device (DDP, FSDP2 full shard, without resharding, with
activation checkpointing, with CPU offload), runs training steps (bf16 compute, fp32 master
weights, AdamW), measures the peak bytes allocated during a steady-state step and prints it
next to ``fsdp-skill plan``'s per-GPU total, with the error.

    python benchmarks/plan_gpu.py                    # a few minutes on one GPU
    python benchmarks/plan_gpu.py --time-limit 120 --models llama-150m
    python benchmarks/plan_gpu.py --device cpu       # same check on CPU (profiler events)

Without a CUDA device (and without --device cpu) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

MODELS = {
    "llama-tiny": dict(
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=4099,
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--models", help="comma-separated (default: 150m,1b,3b; tiny on CPU)")
    parser.add_argument("--strategies", help="comma-separated (default: all that run)")
    parser.add_argument("--seq-len", type=int, help="default 2048 on CUDA, 512 on CPU")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=240, help="seconds; skip the rest")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    from fsdp_skill.plan.measure import STRATEGIES, peak_bytes, planned_bytes

    cpu = args.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (--device cpu measures on the CPU instead)")
        return 0
    default_models = "llama-tiny" if cpu else "llama-150m,llama-1b,llama-3b"
    models = (args.models or default_models).split(",")
    # CPU offload needs an accelerator to offload from
    default_strategies = [s for s in STRATEGIES if not (cpu and "+offload" in s)]
    strategies = args.strategies.split(",") if args.strategies else default_strategies
    unknown = [m for m in models if m not in MODELS] + [
        s for s in strategies if s not in STRATEGIES
    ]
    if unknown:
        print(f"unknown model or strategy: {', '.join(unknown)}", file=sys.stderr)
        return 2
    seq = args.seq_len or (512 if cpu else 2048)
    device = torch.device("cpu") if cpu else torch.device("cuda", 0)
    if not cpu:
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group("gloo" if cpu else "nccl", rank=0, world_size=1)
    name = "CPU (profiler allocation events)" if cpu else torch.cuda.get_device_name(device)
    print(
        f"device: {name}; torch {torch.__version__}; seq {seq} x micro-batch "
        f"{args.micro_batch}; bf16 compute, fp32 master weights, AdamW"
    )
    header = f"{'model':<12} {'strategy':<26} {'planned MB':>11} {'measured MB':>12} {'error':>7}"
    print(header)
    print("-" * len(header))
    start, errors, skipped = time.monotonic(), [], 0
    for model_name in models:
        for strategy in strategies:
            if time.monotonic() - start > args.time_limit:
                skipped += 1
                continue
            config = MODELS[model_name]
            planned = planned_bytes(config, strategy, seq, args.micro_batch, world=1)
            try:
                measured = peak_bytes(config, strategy, seq, args.micro_batch, device)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                print(f"{model_name:<12} {strategy:<26} {planned / 1e6:>11.1f} {'OOM':>12}")
                continue
            error = (planned - measured) / measured
            errors.append(abs(error))
            print(
                f"{model_name:<12} {strategy:<26} {planned / 1e6:>11.1f} "
                f"{measured / 1e6:>12.1f} {error:>+7.1%}"
            )
    if errors:
        print(
            f"mean |error| {sum(errors) / len(errors):.1%}, worst {max(errors):.1%} over "
            f"{len(errors)} runs (positive: the plan is above the measurement)"
        )
    if skipped:
        print(f"{skipped} run(s) skipped: over --time-limit {args.time_limit:.0f}s")
    print(f"took {time.monotonic() - start:.0f}s")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
