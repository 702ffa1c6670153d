"""Side by side on CPU: the project `fsdp-skill new` writes, against a minimal FSDP2 loop and
against torchtitan, on the same model, batch and ranks.

The model is torchtitan's Llama 3 "debugmodel" shape (dim 256, 6 layers, 16 heads, FFN 768,
vocab 2048), fp32, on 2 gloo ranks with synthetic tokens. Each pair of runs (project, then
the baseline) runs back to back; the ratio of their median tokens/s is taken per pair and the
median ratio is reported, so that the load of a shared machine cancels out.

    python benchmarks/train_compare.py                      # project vs a minimal FSDP2 loop
    python benchmarks/train_compare.py --torchtitan         # ... and vs torchtitan (own venv)
    python benchmarks/train_compare.py --device cuda --nproc 8 --seq-len 2048   # on GPUs

torchtitan (pinned below) is installed into its own virtual environment under
``--venv-dir``; that environment reuses this interpreter's torch through a ``.pth`` file, so
both sides run the same torch build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

# 0.2.2 is the last release whose Llama 3 debugmodel uses SDPA attention; 0.3.0 offers only
# FlexAttention, which has no backward on CPU in torch 2.13.
TORCHTITAN = "torchtitan==0.2.2"
TRITON = "triton==3.9.0"
DEBUG_MODEL = {  # torchtitan's llama3 debugmodel, as a Hugging Face Llama config
    "model_type": "llama",
    "vocab_size": 2048,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 6,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
}

# A training loop with nothing but what FSDP2 needs: the same model, shards, optimizer and
# step as the project, without its options, data pipeline, checkpoints or logging.
MINIMAL_LOOP = """
import json, os, sys, time
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import AutoConfig, AutoModelForCausalLM

fields, steps, batch, seq = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
device = torch.device(sys.argv[5], int(os.environ["LOCAL_RANK"])) if sys.argv[5] == "cuda" else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)
dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
torch.manual_seed(0)
config = AutoConfig.for_model(fields.pop("model_type"), **fields)
with device:
    model = AutoModelForCausalLM.from_config(config)
model.config.use_cache = False
for block in model.model.layers:
    fully_shard(block)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
world = dist.get_world_size()
for step in range(1, steps + 1):
    start = time.perf_counter()
    ids = torch.randint(config.vocab_size, (batch, seq), device=device)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if dist.get_rank() == 0:
        print(json.dumps({"step": step, "tokens_per_s": batch * seq * world / seconds}), flush=True)
dist.destroy_process_group()
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per rank per step")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--skip", type=int, default=4, help="first steps left out (warm-up)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--torchtitan", action="store_true", help=f"also run {TORCHTITAN}")
    parser.add_argument("--venv-dir", type=Path, default=Path(".bench-venvs"))
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    return parser.parse_args()


def torchrun(args: argparse.Namespace, *command: str, python: str = sys.executable, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.setdefault("PYTHONWARNINGS", "ignore")
    full = [python, "-m", "torch.distributed.run", "--standalone"]
    full += [f"--nproc-per-node={args.nproc}", *command]
    try:
        return subprocess.run(
            full, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(full, -9, "", f"no result within {args.timeout} s")


def steady_rate(records: list[dict], skip: int) -> float:
    steady = [r["tokens_per_s"] for r in records if r["step"] > skip]
    return statistics.median(steady or [r["tokens_per_s"] for r in records])


def failure(proc) -> str:
    lines = [x for x in proc.stderr.splitlines() if "Error" in x or "error" in x]
    return (lines or proc.stderr.strip().splitlines()[-1:] or ["failed"])[-1].strip()[:160]


def run_project(root: Path, args: argparse.Namespace) -> float:
    from fsdp_skill.scaffold import new_project

    project = root / "project"
    if not project.exists():
        (root / "model.json").write_text(json.dumps(DEBUG_MODEL))
        new_project(project, model_config=str(root / "model.json"), precision="fp32")
        config = json.loads((project / "train_config.json").read_text())
        config["data"].update(seq_len=args.seq_len, micro_batch=args.micro_batch)
        config["optim"].update(lr=3e-4, warmup_steps=2, decay_steps=1000)
        (project / "train_config.json").write_text(json.dumps(config, indent=2))
    proc = torchrun(
        args, str(project / "train.py"), f"--device={args.device}",
        f"--max-steps={args.steps}", "--log-every=1", "--log-json", "--no-checkpoint",
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"project: {failure(proc)}")
    records = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith('{"step"')]
    return steady_rate([r for r in records if "loss" in r], args.skip)


def run_minimal(root: Path, args: argparse.Namespace) -> float:
    script = root / "minimal_loop.py"
    script.write_text(MINIMAL_LOOP)
    proc = torchrun(
        args, str(script), json.dumps(DEBUG_MODEL), str(args.steps), str(args.micro_batch),
        str(args.seq_len), args.device,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"minimal loop: {failure(proc)}")
    return steady_rate([json.loads(x) for x in proc.stdout.splitlines()], args.skip)


def torchtitan_python(args: argparse.Namespace) -> str:
    """The interpreter of a virtual environment with torchtitan and this torch."""
    import site

    venv = args.venv_dir.resolve() / "torchtitan"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # This interpreter's packages (torch, transformers) after the venv's own.
        Path(purelib, "shared-torch.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        # torchtitan alone first: its requirements name torch, and pip must never fetch
        # another torch build. Then its other requirements, with torch held at this one's.
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--no-deps", TORCHTITAN], check=True)
        requires = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print('\\n'.join(m.requires('torchtitan') or []))"],
            capture_output=True, text=True, check=True,
        ).stdout.split("\n")  # fmt: skip
        wanted = [r.split(";")[0].strip() for r in requires if r and "extra ==" not in r]
        wanted = [r for r in wanted if re.split(r"[<>=!~ ;\[]", r)[0].lower() != "torch"]
        held = venv / "constraints.txt"
        import torch

        held.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
        if wanted:
            subprocess.run([*pip, "-c", str(held), *wanted], check=True)
        if not torch.cuda.is_available():
            # torchtitan imports triton (a CUDA build of torch brings it); and the CPU shim.
            subprocess.run([*pip, "-c", str(held), TRITON], check=True)
            Path(purelib, "sitecustomize.py").write_text(CPU_SHIM)
    return str(python)


# torch on CPU: torchtitan asks torch for an accelerator and calls CUDA-style functions on
# its device module; this makes the CPU that device (written into torchtitan's venv only).
# Two NCCL-only calls are made Gloo-safe too: torchtitan sets FSDP's gradient divide factor to
# 1, which FSDP turns into a PREMUL_SUM reduce-scatter that Gloo refuses (summing, then
# dividing by that 1, is the same); and its barrier names a CUDA device (device_ids).
CPU_SHIM = """\
import types
import torch
import torch._utils
import torch.cpu
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

torch._utils._get_available_device_type = lambda: "cpu"
for name, fn in {
    "memory_stats": lambda *a, **k: {},
    "reset_peak_memory_stats": lambda *a, **k: None,
    "get_device_properties": lambda *a, **k: types.SimpleNamespace(name="cpu", total_memory=1 << 34),
    "get_device_name": lambda *a, **k: "cpu",
    "empty_cache": lambda *a, **k: None,
}.items():
    if not hasattr(torch.cpu, name):
        setattr(torch.cpu, name, fn)

_set_divide_factor, _barrier = FSDPModule.set_gradient_divide_factor, dist.barrier


def _divide_after_a_sum(self, factor):
    _set_divide_factor(self, factor)
    self.set_force_sum_reduction_for_comms(True)


def _barrier_on_cpu(group=None, async_op=False, device_ids=None):
    return _barrier(group=group, async_op=async_op)


FSDPModule.set_gradient_divide_factor = _divide_after_a_sum
dist.barrier = _barrier_on_cpu
"""


def torchtitan_assets(root: Path) -> tuple[Path, Path]:
    """A 2048-token BPE tokenizer and a local text dataset: torchtitan's defaults (its test
    tokenizer, the c4_test files) ship in its repository, not in the package."""
    import random

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    assets, data = root / "tt-assets", root / "tt-data"
    if assets.exists():
        return assets, data
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(3000)]
    docs = [" ".join(rng.choice(words) for _ in range(400)) for _ in range(400)]
    data.mkdir(parents=True)
    (data / "train.json").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
    special = ["<|begin_of_text|>", "<|end_of_text|>", "<unk>"]
    tokenizer.train_from_iterator(
        docs, trainers.BpeTrainer(vocab_size=2048, special_tokens=special)
    )
    assets.mkdir(parents=True)
    tokenizer.save(str(assets / "tokenizer.json"))
    config = {"bos_token": special[0], "eos_token": special[1]}
    (assets / "tokenizer_config.json").write_text(json.dumps(config))
    return assets, data


def run_torchtitan(root: Path, args: argparse.Namespace, python: str) -> float:
    """torchtitan's trainer (its llama3 debugmodel, fp32, no activation checkpointing, as the
    project) on the same batch; tokens/s from its `tps` log lines (per rank, so multiplied by
    the ranks)."""
    assets, data = torchtitan_assets(root)
    proc = torchrun(
        args, "-m", "torchtitan.train", "--model.name", "llama3", "--model.flavor", "debugmodel",
        "--model.hf_assets_path", str(assets), "--training.dataset", "c4_test",
        "--training.dataset_path", str(data), "--training.steps", str(args.steps),
        "--training.seq_len", str(args.seq_len), "--training.local_batch_size",
        str(args.micro_batch), "--training.mixed_precision_param", "float32",
        "--activation_checkpoint.mode", "none", "--metrics.log_freq", "1",
        "--job.dump_folder", str(root / "tt-out"),
        python=python, cwd=root,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"torchtitan: {failure(proc)}")
    rates = [
        {"step": int(m.group(1)), "tokens_per_s": float(m.group(2).replace(",", "")) * args.nproc}
        for m in re.finditer(r"step:\s*(\d+).*?tps:\s*([\d,]+)", proc.stdout + proc.stderr)
    ]
    if not rates:
        raise RuntimeError("torchtitan: no tps in its log")
    return steady_rate(rates, args.skip)


def compare(name: str, root: Path, args: argparse.Namespace, baseline) -> dict:
    ratios, ours, theirs = [], [], []
    for pair in range(args.pairs):
        print(f"pair {pair + 1}/{args.pairs}: project vs {name} ...", file=sys.stderr, flush=True)
        try:
            a, b = run_project(root, args), baseline(root, args)
        except RuntimeError as exc:
            return {"error": str(exc)}
        ours.append(a)
        theirs.append(b)
        ratios.append(a / b)
    return {
        "project": statistics.median(ours),
        "baseline": statistics.median(theirs),
        "ratio": statistics.median(ratios),
        "spread": (min(ratios), max(ratios)),
    }


def main() -> int:
    args = parse_args()
    began = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fsdp-compare-") as scratch:
        root = Path(scratch)
        rows.append(("minimal FSDP2 loop", compare("minimal loop", root, args, run_minimal)))
        if args.torchtitan:
            try:
                python = torchtitan_python(args)
            except (subprocess.CalledProcessError, OSError) as exc:
                rows.append((TORCHTITAN, {"error": f"cannot install: {exc}"}))
            else:

                def titan(root: Path, args: argparse.Namespace) -> float:
                    return run_torchtitan(root, args, python)

                rows.append((TORCHTITAN, compare("torchtitan", root, args, titan)))
    import torch

    print(
        textwrap.dedent(
            f"""\
            {args.nproc} x {args.device}, torch {torch.__version__}; Llama debugmodel shape
            (6 x 256, vocab 2048), fp32, {args.micro_batch} x {args.seq_len} tokens per rank
            per step, median of steps {args.skip + 1}-{args.steps}, {args.pairs} paired runs,
            {time.perf_counter() - began:.0f} s in all
            """
        )
    )
    print("| baseline | project tokens/s | baseline tokens/s | project / baseline (min-max) |")
    print("|---|---:|---:|---:|")
    for name, r in rows:
        if "error" in r:
            print(f"| {name} | failed: {r['error']} | | |")
            continue
        low, high = r["spread"]
        print(
            f"| {name} | {r['project']:,.0f} | {r['baseline']:,.0f} | "
            f"{r['ratio']:.2f} ({low:.2f}-{high:.2f}) |"
        )
    return 0 if all("error" not in r for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
