"""Throughput of the project `fsdp-skill new` writes, on one CUDA device.

Writes the project for a Llama-style model of about 1.2B parameters (the shape of Llama 3.2 1B:
16 layers, hidden 2048, 32 heads, 8 KV heads, vocab 128256, tied embeddings), runs its
train.py for a short while on synthetic tokens, and prints tokens/s, achieved TFLOP/s, MFU and
peak memory for each variant, next to a baseline measured in the same run: the bf16 matrix
multiply throughput of this device, the ceiling any training step can approach.

    python benchmarks/train_gpu.py                 # a few minutes on one GPU
    python benchmarks/train_gpu.py --gpus 8        # one node, 8 ranks
    python benchmarks/train_gpu.py --smoke         # CPU, tiny model: checks the plumbing only

MFU counts model FLOPs only (6 per parameter per token plus attention), so activation
checkpointing's recomputation lowers it: that is the price of the memory it saves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LLAMA_1B = {
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    "tie_word_embeddings": True,
}
TINY = {
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
VARIANTS = {
    "fsdp2-bf16": {"precision": "bf16"},
    "fsdp2-bf16-ac": {"precision": "bf16", "activation_checkpointing": True},
    "fsdp2-bf16-offload": {"precision": "bf16", "cpu_offload": True},
    "fsdp1-bf16": {"precision": "bf16", "fsdp_version": 1},
}
DEFAULT_VARIANTS = "fsdp2-bf16,fsdp2-bf16-ac"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps per variant")
    parser.add_argument("--skip", type=int, default=10, help="first steps left out (warm-up)")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per step")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument(
        "--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, of: {', '.join(VARIANTS)}"
    )
    parser.add_argument("--keep", type=Path, help="write the projects here and keep them")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per variant")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model, a few steps")
    return parser.parse_args()


def gemm_baseline(size: int = 8192, repeats: int = 20) -> float:
    """Measured bf16 matmul throughput of this device, FLOP/s."""
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        a @ b
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 * repeats / seconds


def write_project(dest: Path, model: dict, options: dict, args: argparse.Namespace) -> Path:
    from fsdp_skill.scaffold import new_project

    model_path = dest.parent / f"{dest.name}-model.json"
    model_path.write_text(json.dumps(model))
    new_project(dest, model_config=str(model_path), force=True, **options)
    config_path = dest / "train_config.json"
    config = json.loads(config_path.read_text())
    config["data"].update(seq_len=args.seq_len, micro_batch=args.micro_batch)
    config["optim"].update(lr=3e-4, warmup_steps=args.skip, decay_steps=10 * args.steps)
    config_path.write_text(json.dumps(config, indent=2))
    return dest


def run_variant(project: Path, args: argparse.Namespace, device: str, peak: float) -> dict:
    """Run train.py and summarise its steady-state steps."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={args.gpus}",
        str(project / "train.py"),
        f"--device={device}",
        f"--max-steps={args.steps}",
        "--log-every=1",
        "--log-json",
        "--no-checkpoint",
    ]
    config = json.loads((project / "train_config.json").read_text())
    config["peak_flops"] = peak  # train.py's MFU is then the fraction of the measured baseline
    (project / "train_config.json").write_text(json.dumps(config, indent=2))
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, cwd=project, timeout=args.timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {args.timeout} s"}
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)  # the reason, for whoever runs it
        errors = [x for x in proc.stderr.splitlines() if "Error" in x] or ["failed"]
        return {"error": errors[-1].strip()[:120]}
    records = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    records = [r for r in records if "loss" in r]  # step records, not evaluations
    steady = [r for r in records if r["step"] > args.skip] or records
    tokens_per_s = statistics.median(r["tokens_per_s"] for r in steady)
    of_baseline = statistics.median(r["mfu"] for r in steady)  # per GPU, vs the baseline
    return {
        "tokens_per_s": tokens_per_s,
        "flops": of_baseline * peak,  # achieved model FLOP/s per GPU
        "peak_memory": max(r["peak_memory_bytes"] for r in steady),
        "loss": steady[-1]["loss"],
    }


def datasheet_peak(device_name: str) -> float | None:
    """The dense bf16 peak the project knows for this device (from its tracking.py table)."""
    import importlib

    from fsdp_skill.scaffold import TEMPLATE_DIR

    sys.path.insert(0, str(TEMPLATE_DIR))
    try:
        tracking = importlib.import_module("tracking")
    finally:
        sys.path.remove(str(TEMPLATE_DIR))
    return next((v for k, v in tracking.PEAK_BF16_FLOPS.items() if k in device_name), None)


def table(
    rows: list[tuple[str, dict]], baseline: float, sheet: float | None, measured: bool
) -> str:
    """The Markdown table: the baseline row, then one row per variant."""
    header = (
        "| run | tokens/s | TFLOP/s per device | MFU (data sheet) | of measured matmul "
        "| peak memory | final loss |"
    )
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|"]
    if measured:
        sheet_text = f"{baseline / sheet:.1%}" if sheet else "n/a"
        lines.append(
            f"| bf16 matmul 8192^3 (baseline) | | {baseline / 1e12:.1f} | {sheet_text} | 100% | | |"
        )
    else:
        lines.append("| bf16 matmul (baseline) | not measured without CUDA | | | | | |")
    for name, r in rows:
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} | | | | | |")
            continue
        mfu = f"{r['flops'] / sheet:.1%}" if sheet else "n/a"
        share = f"{r['flops'] / baseline:.1%}" if measured else "n/a"
        lines.append(
            f"| {name} | {r['tokens_per_s']:,.0f} | {r['flops'] / 1e12:.1f} | {mfu} | "
            f"{share} | {r['peak_memory'] / 2**30:.2f} GiB | "
            f"{r['loss']:.3f} |"
        )
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    import torch

    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"train_gpu.py: unknown variant(s) {unknown}; known: {list(VARIANTS)}")
        return 2
    if args.smoke:
        # A nominal baseline: train.py's MFU field then carries the achieved FLOP/s.
        device, model, baseline, sheet, title = "cpu", TINY, 1e12, None, "CPU smoke run"
        args.seq_len, args.micro_batch = min(args.seq_len, 64), min(args.micro_batch, 2)
        args.steps, args.skip = min(args.steps, 6), min(args.skip, 2)
    else:
        if not torch.cuda.is_available():
            print("train_gpu.py: no CUDA device here; this benchmark needs one (--smoke: CPU)")
            return 2
        if torch.cuda.device_count() < args.gpus:
            print(f"train_gpu.py: --gpus {args.gpus} but {torch.cuda.device_count()} visible")
            return 2
        device, model = "cuda", LLAMA_1B
        name = torch.cuda.get_device_name(0)
        baseline, sheet = gemm_baseline(), datasheet_peak(name)
        title = f"{args.gpus} x {name}, torch {torch.__version__}"
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        rows = []
        for variant in names:
            project = write_project(root / variant, model, VARIANTS[variant], args)
            print(f"running {variant} ...", file=sys.stderr, flush=True)
            rows.append((variant, run_variant(project, args, device, baseline)))
    print(
        f"{title}; {args.micro_batch} x {args.seq_len} tokens per device per step, "
        f"median of steps {args.skip + 1}-{args.steps}\n"
    )
    print(table(rows, baseline, sheet, measured=not args.smoke))
    return 0 if all("error" not in r for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
