"""The planner against one CUDA GPU: measured peak memory and step time of 3 configurations
next to what ``fsdp-skill plan`` says for them.

Each configuration is a Llama-style ``transformers`` model (random weights) sharded as the
planner's snippet does, bf16 compute, fp32 master weights, AdamW, world size 1:

1. 3B, FSDP2 full shard, sequence 2048 x micro-batch 2: memory, and compute at the planner's
   MFU assumption;
2. 1B, full shard + activation checkpointing, 4096 x 2: the recomputation term;
3. 1B, full shard + CPU offload, 2048 x 2: the CPU optimizer step and host copies.

Measured per configuration: the peak of ``torch.cuda.max_memory_allocated`` over a steady-state
step, and the median over ``--steps`` steps of forward + backward, the optimizer step and
the whole step. Baselines measured in the same run: the GPU's bf16 matmul FLOP/s and the
host's fused CPU AdamW rate (benchmarks/cpu_adam.py). Printed: planned vs measured, the MFU
the run implies (what to pass as ``plan --mfu``), and a second plan with the measured
baselines as ``--gpu-flops`` / ``--cpu-adam-rate``.

    python benchmarks/plan_gpu.py                  # one GPU, a few minutes
    python benchmarks/plan_gpu.py --json out.json
    python benchmarks/plan_gpu.py --device cpu     # the same on the CPU, tiny models: checks
                                                   # the script (profiler memory, fake group)

Without a CUDA device it refuses (exit 2) unless ``--device cpu`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
# (model, strategy, sequence, micro-batch)
GPU_RUNS = (
    ("llama-3b", "fsdp2-full-shard", 2048, 2),
    ("llama-1b", "fsdp2-full-shard+ac", 4096, 2),
    ("llama-1b", "fsdp2-full-shard+offload", 2048, 2),
)
# CPU offload needs an accelerator to offload from: the CPU check runs the other two kinds
CPU_RUNS = (
    ("llama-tiny", "fsdp2-full-shard", 256, 2),
    ("llama-tiny", "fsdp2-full-shard+ac", 256, 2),
    ("llama-tiny", "fsdp2-no-reshard", 256, 2),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def matmul_flops(device) -> float:
    """Dense matmul FLOP/s of ``device`` (bf16 on a GPU, fp32 on the CPU): the baseline."""
    import torch

    n, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(10):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def cpu_adam_rate() -> float:
    """The host's fused CPU AdamW parameters/s on one thread (as torchrun runs a rank)."""
    import torch
    from cpu_adam import adamw_rate, make_params

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return adamw_rate(make_params(64e6, 1024), True, 5, time.perf_counter)
    finally:
        torch.set_num_threads(threads)


def runs_from(args: argparse.Namespace, cpu: bool) -> list[tuple[str, str, int, int]]:
    """The configurations to run: the defaults, or the product of --models x --strategies."""
    if not (args.models or args.strategies or args.seq_len):
        return list(CPU_RUNS if cpu else GPU_RUNS)
    from fsdp_skill.plan.measure import STRATEGIES

    models = (args.models or ("llama-tiny" if cpu else "llama-1b")).split(",")
    strategies = (args.strategies or "fsdp2-full-shard").split(",")
    unknown = [m for m in models if m not in MODELS] + [
        s for s in strategies if s not in STRATEGIES
    ]
    if unknown:
        raise SystemExit(f"unknown model or strategy: {', '.join(unknown)}")
    seq = args.seq_len or (256 if cpu else 2048)
    return [(m, s, seq, args.micro_batch) for m in models for s in strategies]


def measure_one(run, device, baselines: dict, steps: int) -> dict:
    """Planned and measured memory and step time of one configuration."""
    from fsdp_skill.plan.measure import peak_bytes, planned_row, step_seconds

    model, strategy, seq, batch = run
    config = MODELS[model]
    default = planned_row(config, strategy, seq, batch, 1)
    calibrated = planned_row(
        config,
        strategy,
        seq,
        batch,
        1,
        gpu_flops=baselines["matmul_flops"],
        cpu_adam_rate=baselines.get("cpu_adam_rate"),
    )
    peak = peak_bytes(config, strategy, seq, batch, device)
    times = step_seconds(config, strategy, seq, batch, device, steps)
    flops = default["step"]["flops_per_gpu"]
    return {
        "model": model,
        "strategy": strategy,
        "seq_len": seq,
        "micro_batch": batch,
        "planned_bytes": default["per_gpu_bytes"]["total"],
        "measured_bytes": peak,
        "planned_step": default["step"],
        "calibrated_step": calibrated["step"],
        "measured_seconds": times,
        # what this run says --mfu should be, against the datasheet peak the plan assumes
        "implied_mfu": flops / (times["forward_backward"] * default["step"]["peak_flops"]),
        "implied_mfu_of_matmul": flops / (times["forward_backward"] * baselines["matmul_flops"]),
    }


def _row(r: dict) -> str:
    mem_err = (r["planned_bytes"] - r["measured_bytes"]) / r["measured_bytes"]
    step, measured = r["planned_step"]["step_seconds"], r["measured_seconds"]["step"]
    cal = r["calibrated_step"]["step_seconds"]
    return (
        f"| {r['model']} | {r['strategy']} | {r['seq_len']} x {r['micro_batch']} "
        f"| {r['planned_bytes'] / 1e9:.2f} | {r['measured_bytes'] / 1e9:.2f} | {mem_err:+.1%} "
        f"| {step:.3f} | {cal:.3f} | {measured:.3f} | {(step - measured) / measured:+.1%} "
        f"| {r['measured_seconds']['forward_backward']:.3f} "
        f"| {r['measured_seconds']['optimizer']:.3f} "
        f"({r['planned_step']['optimizer_seconds']:.3f}) | {r['implied_mfu']:.2f} |"
    )


HEADER = (
    "| model | strategy | seq x batch | planned GB | measured GB | error | planned step s "
    "| planned, measured baselines | measured step s | error | measured fwd+bwd s "
    "| measured optimizer s (planned) | implied MFU |"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--models", help="comma-separated, crossed with --strategies")
    parser.add_argument("--strategies", help="comma-separated (measure.STRATEGIES)")
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per configuration")
    parser.add_argument("--time-limit", type=float, default=480, help="seconds; skip the rest")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    cpu = args.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        print(
            "plan_gpu.py measures on a CUDA GPU and this machine has none visible "
            "(torch.cuda.is_available() is False); nothing was measured. "
            "--device cpu runs the same measurement on the CPU with tiny models.",
            file=sys.stderr,
        )
        return 2
    runs = runs_from(args, cpu)
    device = torch.device("cpu") if cpu else torch.device("cuda", 0)
    if cpu:
        # one process, no communication, every free seen by the profiler (see measure.py)
        dist.init_process_group("fake", rank=0, world_size=1)
    else:
        torch.cuda.set_device(device)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        dist.init_process_group("nccl", rank=0, world_size=1)
    name = "CPU" if cpu else torch.cuda.get_device_name(device)
    baselines = {"matmul_flops": matmul_flops(device)}
    if any("+offload" in r[1] for r in runs):
        baselines["cpu_adam_rate"] = cpu_adam_rate()
    print(
        f"device: {name}; torch {torch.__version__}; bf16 compute, fp32 master, AdamW; "
        f"baselines: matmul {baselines['matmul_flops'] / 1e12:.3g} TFLOP/s"
        + (
            f", CPU fused AdamW {baselines['cpu_adam_rate'] / 1e9:.2f}B params/s"
            if "cpu_adam_rate" in baselines
            else ""
        )
    )
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    start, results, skipped = time.monotonic(), [], 0
    for run in runs:
        if time.monotonic() - start > args.time_limit:
            skipped += 1
            continue
        try:
            result = measure_one(run, device, baselines, args.steps)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            print(f"| {run[0]} | {run[1]} | {run[2]} x {run[3]} | OOM |")
            continue
        results.append(result)
        print(_row(result), flush=True)
    if results:
        mem = [abs(r["planned_bytes"] / r["measured_bytes"] - 1) for r in results]
        step = [
            abs(r["planned_step"]["step_seconds"] / r["measured_seconds"]["step"] - 1)
            for r in results
        ]
        print(
            f"memory error: worst {max(mem):.1%}; step-time error at the default MFU: worst "
            f"{max(step):.1%} over {len(results)} runs (positive: the plan is above the "
            "measurement)"
        )
    if skipped:
        print(f"{skipped} run(s) skipped: over --time-limit {args.time_limit:.0f}s")
    print(f"took {time.monotonic() - start:.0f}s")
    if args.json:
        from fsdp_skill.atomic import write_text

        payload = {"device": name, "torch": torch.__version__, "baselines": baselines}
        write_text(args.json, json.dumps({**payload, "runs": results}, indent=2) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
