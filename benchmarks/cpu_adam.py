"""CPU AdamW throughput: how fast a rank steps its optimizer when FSDP2 offloads to the CPU.

With ``CPUOffloadPolicy`` the sharded fp32 parameters, gradients and AdamW states live in host
memory and ``optimizer.step()`` runs on the CPU. ``fsdp-skill plan`` times that step as
parameters per rank / a CPU AdamW rate; this script measures the rate on this machine for
``torch.optim.AdamW`` as the planner's snippet builds it (on CPU tensors torch has no foreach
kernels, so that is the per-tensor loop) and with ``fused=True``, with one thread and with
every core, next to a baseline measured in the same run: the bandwidth of a plain tensor copy
(AdamW on the CPU is bound by memory traffic, not arithmetic).

    python benchmarks/cpu_adam.py                  # about a minute
    python benchmarks/cpu_adam.py --params 64e6 --json

Each figure is the fastest of ``--repeats`` steps after a warm-up step (which creates the
states). With one thread it is timed in that thread's CPU time as well as on the wall clock:
CPU time leaves out the time other processes hold the core, so it measures the core, not
the machine's load. The default size (64M parameters, 1 GB of fp32 parameters, gradients
and moments) is far larger than a CPU cache, like a rank's shard of a real model: a small
model's step runs from cache and is several times faster. Pass the rate for your training
nodes (run this there with the threads a rank gets) as ``fsdp-skill plan --cpu-adam-rate``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def layer_shapes(hidden: int) -> list[tuple[int, ...]]:
    """The parameter shapes of one Llama decoder layer (SwiGLU MLP of 8/3 x hidden)."""
    ffn = 256 * round(8 * hidden / 3 / 256)
    return [(hidden, hidden)] * 4 + [(ffn, hidden)] * 2 + [(hidden, ffn), (hidden,), (hidden,)]


def make_params(total: float, hidden: int) -> list:
    """Parameters with gradients, Llama-layer shaped, about ``total`` elements in all."""
    import torch

    shapes: list[tuple[int, ...]] = []
    count = 0
    while count < total:
        for shape in layer_shapes(hidden):
            shapes.append(shape)
            count += torch.Size(shape).numel()
    params = []
    for shape in shapes:
        p = torch.nn.Parameter(torch.randn(shape))
        p.grad = torch.randn(shape)
        params.append(p)
    return params


def best_seconds(fn, repeats: int, clock=time.perf_counter) -> float:
    """The fastest of ``repeats`` calls of ``fn``, timed with ``clock``."""
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def copy_bandwidth(numel: int, repeats: int, clock) -> float:
    """Bytes per second a tensor copy moves (read + write): the memory-bound baseline."""
    import torch

    src, dst = torch.randn(numel), torch.empty(numel)
    dst.copy_(src)
    return 2 * 4 * numel / best_seconds(lambda: dst.copy_(src), repeats, clock)


def adamw_rate(params: list, fused: bool, repeats: int, clock) -> float:
    """Parameters per second ``torch.optim.AdamW`` steps (the states already exist)."""
    import torch

    optimizer = torch.optim.AdamW(params, lr=1e-4, fused=fused or None)
    optimizer.step()  # creates exp_avg and exp_avg_sq
    numel = sum(p.numel() for p in params)
    rate = numel / best_seconds(optimizer.step, repeats, clock)
    optimizer.state.clear()  # free the moments before the next variant makes its own
    return rate


def measure(total: float, hidden: int, repeats: int) -> list[dict]:
    """One row per thread count and clock: copy bandwidth and AdamW rates, same run."""
    import torch

    params = make_params(total, hidden)
    numel = sum(p.numel() for p in params)
    runs = [(1, "thread CPU time", time.thread_time), (1, "wall", time.perf_counter)]
    if (os.cpu_count() or 1) > 1:
        runs.append((os.cpu_count() or 1, "wall", time.perf_counter))
    rows = []
    for threads, clock_name, clock in runs:
        torch.set_num_threads(threads)
        bandwidth = copy_bandwidth(numel, repeats, clock)
        default = adamw_rate(params, False, repeats, clock)
        fused = adamw_rate(params, True, repeats, clock)
        rows.append(
            {
                "threads": threads,
                "clock": clock_name,
                "params": numel,
                "copy_bytes_per_second": bandwidth,
                "adamw_params_per_second": default,
                "adamw_fused_params_per_second": fused,
                # bytes of memory traffic each parameter costs, if the step ran at copy speed
                "adamw_bytes_per_param": bandwidth / default,
                "adamw_fused_bytes_per_param": bandwidth / fused,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=float, default=64e6, help="elements stepped")
    parser.add_argument("--hidden", type=int, default=1024, help="layer shapes of this width")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import torch

    rows = measure(args.params, args.hidden, args.repeats)
    machine = f"{platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}"
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=2))
        return 0
    print(f"{machine}; {rows[0]['params'] / 1e6:.1f}M fp32 params, best of {args.repeats}")
    print("| threads | clock | copy GB/s (baseline) | AdamW M params/s | fused AdamW M params/s |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['threads']} | {r['clock']} | {r['copy_bytes_per_second'] / 1e9:.1f} "
            f"| {r['adamw_params_per_second'] / 1e6:.0f} "
            f"({r['adamw_bytes_per_param']:.0f} B/param) "
            f"| {r['adamw_fused_params_per_second'] / 1e6:.0f} "
            f"({r['adamw_fused_bytes_per_param']:.0f} B/param) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
