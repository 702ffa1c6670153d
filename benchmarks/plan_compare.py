"""Compare ``fsdp-skill plan`` with the published estimators of DeepSpeed and accelerate.

For Llama-2-7B, Llama-3-8B and Llama-2-70B / Llama-3-70B on 8 GPUs of 80 GB, prints per-GPU
memory from:

- this planner, FSDP2 full shard (bf16 compute, fp32 master, AdamW), split into model states,
  activations (sequence 4096, micro-batch 1, SDPA) and FSDP buffers, plus the +AC variant;
- DeepSpeed's ZeRO-3 model-state estimator, ``estimate_zero3_model_states_mem_needs`` in
  ``deepspeed/runtime/zero/stage3.py`` (github.com/deepspeedai/DeepSpeed; documented at
  deepspeed.readthedocs.io/en/latest/memory.html): without offload a GPU needs
  4 x largest_layer_params + 18 x params / gpus bytes; with parameter and optimizer offload,
  4 x largest_layer_params on the GPU and 18 x params x 1.5 (buffer factor) per node on the CPU.
  The largest layer is the largest single module's own parameters (here the embedding);
- accelerate's ``estimate-memory`` (``estimate_training_usage`` in
  ``src/accelerate/commands/estimate.py``, github.com/huggingface/accelerate): "training using
  Adam" is the largest of model, gradients, optimizer and step sizes, for one device and batch
  size 1: 16 bytes/param for float32, 8 bytes/param for float16/bfloat16 mixed precision.

All three are computed here from those formulas; neither library is imported. The
planner's pick comes with its estimated step time and tokens/s (neither estimator has one).

A second table shows what the planner recommends in the cases that shaped it: 13B on 4 x 80
GB, 70B on 2 nodes x 8 x 80 GB without ``--cpu-memory`` and with 2 TB per node, and 70B on
one node of 8, where only offload fits. Pass ``--markdown`` for the README tables.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from fsdp_skill.plan import bundled, plan
from fsdp_skill.plan.model import from_hf_config

MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-70b", "llama-3-70b")
GPUS, GPU_MEMORY = 8, "80GB"


def deepspeed_zero3(params: int, largest_layer: int, gpus: int, nodes: int = 1) -> dict:
    """DeepSpeed's ZeRO-3 model-state estimate (bytes), with and without offload, zero_init."""
    return {
        "gpu": 4 * largest_layer + int(18 * params / gpus),
        "gpu_offload": 4 * largest_layer,
        "cpu_offload_per_node": int(params * 18 / nodes * 1.5),
    }


def accelerate_training(params: int) -> dict:
    """accelerate estimate-memory's "Training using Adam" column (bytes), per device."""
    fp32 = 4 * params
    return {"float32": 4 * fp32, "mixed": 2 * fp32}


def gb(value: float) -> str:
    return f"{value / 1e9:.1f}"


def _step(result: dict) -> str:
    """The pick's estimated step time and tokens/s, as a cell."""
    name = result["recommendation"]["strategy"]
    row = next((r for r in result["strategies"] if r["name"] == name), None)
    if row is None:
        return "-"
    return f"{row['step_seconds']:.2f} ({row['tokens_per_second']:,.0f})"


# (case, plan options): the cases of the planner's recommendation tests
CASES = (
    ("13B, 4 x 80 GB", {"params": "13b", "gpus": 4, "gpu_memory": "80GB"}),
    (
        "llama-3-70b, 2 nodes x 8 x 80 GB",
        {"model": "llama-3-70b", "gpus": 16, "nodes": 2, "gpu_memory": "80GB"},
    ),
    (
        "llama-3-70b, 2 nodes x 8 x 80 GB, 2 TB host memory per node",
        {
            "model": "llama-3-70b",
            "gpus": 16,
            "nodes": 2,
            "gpu_memory": "80GB",
            "cpu_memory": "2TB",
        },
    ),
    (
        "llama-3-70b, 8 x 80 GB, 1.5 TB host memory",
        {"model": "llama-3-70b", "gpus": 8, "gpu_memory": "80GB", "cpu_memory": "1.5TB"},
    ),
)


def _short(change: str) -> str:
    """An alternative's change, up to its details."""
    return re.split(r" \(| instead of| on every", change)[0]


def recommendations() -> list[list[str]]:
    """What the planner recommends in each case, and what else it says would fit."""
    out = []
    for case, options in CASES:
        result = plan(**options)
        rec = result["recommendation"]
        row = next((r for r in result["strategies"] if r["name"] == rec["strategy"]), None)
        host = rec.get("host_memory")
        memory = "-"
        if host:
            checked = "checked" if host["checked"] else "not checked"
            memory = f"{gb(host['needed_per_node'])} ({checked})"
        alternatives = "; ".join(
            f"{_short(a['change'])}: {a['strategy'] or 'none fits'}"
            + (f" {a['step_seconds']:.2f} s" if a.get("step_seconds") else "")
            for a in rec["alternatives"]
        )
        out.append(
            [
                case,
                rec["strategy"] or "none",
                gb(row["per_gpu_bytes"]["total"]) if row else "-",
                _step(result),
                memory,
                alternatives or "-",
            ]
        )
    return out


CASE_HEADERS = [
    "case",
    "pick",
    "per-GPU GB",
    "step s (tokens/s)",
    "host GB per node",
    "alternatives (step s)",
]


def rows() -> list[list[str]]:
    out = []
    for name in MODELS:
        spec = from_hf_config(bundled.load(name), name)
        result = plan(model=name, gpus=GPUS, gpu_memory=GPU_MEMORY)
        by_name = {s["name"]: s for s in result["strategies"]}
        full, ac = by_name["fsdp2-full-shard"], by_name["fsdp2-full-shard+ac"]
        b = full["per_gpu_bytes"]
        states = b["params"] + b["grads"] + b["optimizer"]
        ds = deepspeed_zero3(spec.params, spec.largest_tensor, GPUS)
        acc = accelerate_training(spec.params)
        out.append(
            [
                name,
                f"{spec.params / 1e9:.2f}B",
                gb(states),
                gb(b["buffers"]),
                gb(b["activations"]),
                gb(b["total"]),
                gb(ac["per_gpu_bytes"]["total"]),
                result["recommendation"]["strategy"] or "none",
                _step(result),
                gb(ds["gpu"]),
                f"{gb(ds['gpu_offload'])} + {gb(ds['cpu_offload_per_node'])} CPU",
                gb(acc["mixed"]),
                gb(acc["float32"]),
            ]
        )
    return out


HEADERS = [
    "model",
    "params",
    "plan: states",
    "plan: buffers",
    "plan: acts",
    "plan: total",
    "plan: total +AC",
    "plan: pick",
    "plan: pick's step s (tokens/s)",
    "DeepSpeed Z3",
    "DeepSpeed Z3 offload",
    "accelerate bf16",
    "accelerate fp32",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table = rows()
    elapsed = time.perf_counter() - start
    print(f"per-GPU GB (10^9 bytes), {GPUS} x {GPU_MEMORY}, seq 4096, micro-batch 1, bf16, AdamW")
    _print(HEADERS, table, args.markdown)
    print(f"planned {len(table)} models in {elapsed * 1000:.0f} ms")
    print()
    print("recommendations (seq 4096, micro-batch 1, bf16, AdamW; H100 at 40% MFU)")
    _print(CASE_HEADERS, recommendations(), args.markdown)
    return 0


def _print(headers: list[str], table: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for r in table:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(x) for x in col) for col in zip(headers, *table, strict=True)]
    for r in [headers, *table]:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
