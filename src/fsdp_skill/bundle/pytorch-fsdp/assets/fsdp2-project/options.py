"""The run's options: defaults, the JSON config file, command-line overrides, and their checks.

Every check runs before any process group, model or data exists, and a bad value stops the run
with one line that names the config file and the key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

DEFAULTS: dict = {
    # A Hugging Face model config (JSON with "model_type"; random init), or a local checkpoint
    # folder / hub name to load weights from. Paths are relative to the config file.
    "model": {"config": "model_config.json", "name_or_path": None, "attn_implementation": "sdpa"},
    "fsdp": {
        "version": 2,  # 2: fully_shard (per-parameter DTensor sharding); 1: FullyShardedDataParallel
        "precision": "bf16",  # bf16 | fp16 (with a gradient scaler) | fp32
        "cpu_offload": False,  # keep sharded parameters, gradients and optimizer state on CPU
        "activation_checkpointing": False,  # false | true or "full" | "selective" (keeps matmuls)
        "reshard_after_forward": True,  # False: keep parameters gathered until backward (faster)
        "replicate": 1,  # HSDP: replicas of the model; each is sharded over world / replicate ranks
        "compile": False,  # torch.compile each transformer block
    },
    "data": {
        # synthetic | text (.txt/.jsonl files) | tokens (a folder written by prepare.py) | hf
        "kind": "synthetic",
        "path": None,  # text: a file, a glob or a list of them; tokens: a folder; hf: a dataset
        "val_path": None,  # the validation data, of the same kind (tokens: its "val" split)
        "val_fraction": 0.0,  # without val_path: hold out this share of the training sequences
        "split": "train",  # hf: the training split
        "val_split": None,  # hf: the validation split
        "streaming": False,  # hf: read as a stream, tokenised and packed on the fly, in order
        "text_field": "text",
        "tokenizer": None,  # a local tokenizer folder; None: UTF-8 bytes are the tokens
        "seq_len": 256,
        "num_samples": 100_000,  # synthetic only
        "micro_batch": 8,  # most sequences per rank per forward/backward
        "num_workers": 0,
    },
    "optim": {
        "lr": 1e-3,  # for the small default model; larger models usually want 1e-4 to 3e-4
        "weight_decay": 0.1,
        "betas": [0.9, 0.95],
        "eps": 1e-8,
        "grad_clip": 1.0,  # the largest gradient norm; null: no clipping (the norm is still logged)
        "grad_accum": 1,  # micro-batches per optimizer step, when train.global_batch_size is null
        "warmup_steps": 10,
        "decay_steps": None,  # length of the cosine schedule; None: max_steps at the first start
        "min_lr_ratio": 0.1,
    },
    "train": {
        "max_steps": 1000,
        # Sequences per optimizer step, on all ranks together; null: micro_batch x world size x
        # grad_accum at the first start. Kept on resume, whatever the world size.
        "global_batch_size": None,
        "seed": 1234,
        "log_every": 10,
    },
    "eval": {
        "every": 0,  # validation loss every N steps (0: never)
        "batches": 8,  # micro-batches of validation data per rank
        "prompt": None,  # text to continue at each evaluation (greedy), printed by rank 0
        "max_new_tokens": 32,
    },
    "checkpoint": {
        "dir": "checkpoints",
        "every": 500,
        "keep": 3,
        "best": False,  # also keep the model of the lowest validation loss in dir/best
    },
    "profile": {
        "start_step": None,  # trace `steps` steps from this one with torch.profiler
        "steps": 3,
        "dir": "profile",
        "memory_snapshot_steps": 0,  # CUDA: record allocations for N steps, then dump a snapshot
    },
    # Optional sinks beside the JSON lines: a TensorBoard log folder, a W&B project name.
    "tracking": {"tensorboard": None, "wandb": None},
    # Dense bf16 FLOP/s of one device for MFU; None: looked up from the device name (CUDA only).
    "peak_flops": None,
}

DATA_KINDS = ("synthetic", "text", "tokens", "hf")


class ConfigError(SystemExit):
    """A bad option or input: the entry points print its one line and exit with status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def run(main, name: str) -> None:
    """Run an entry point: a ConfigError is one line on stderr and exit status 2."""
    try:
        sys.exit(main())
    except ConfigError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a causal LM with FSDP2, resumably.")
    parser.add_argument(
        "--config", type=Path, default=Path(__file__).with_name("train_config.json")
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--global-batch-size", type=int, default=None)
    parser.add_argument("--checkpoint-dir", type=Path, default=None)
    parser.add_argument("--checkpoint-every", type=int, default=None)
    parser.add_argument(
        "--no-checkpoint", action="store_true", help="neither resume nor save (benchmarks)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--log-every", type=int, default=None)
    parser.add_argument("--log-json", action="store_true", help="one JSON line per logged step")
    return parser.parse_args(argv)


def read_json(path: Path, what: str) -> dict:
    """A JSON object from ``path``; anything else is a one-line error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} not found") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, not {type(data).__name__}")
    return data


def merge(base: dict, override: dict, source: str) -> dict:
    """``base`` updated by ``override``, section by section; unknown keys are errors."""
    out = json.loads(json.dumps(base))
    for key, value in override.items():
        if key not in base:
            raise ConfigError(f"{source}: unknown config key {key!r}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: {key} must be an object, not {value!r}")
            unknown = set(value) - set(base[key])
            if unknown:
                raise ConfigError(f"{source}: unknown config keys in {key!r}: {sorted(unknown)}")
            out[key].update(value)
        else:
            out[key] = value
    return out


def load_options(args: argparse.Namespace) -> dict:
    """The checked options of this run (config file, then command line)."""
    source = str(args.config)
    cfg = merge(DEFAULTS, read_json(args.config, "config file"), source)
    here = args.config.resolve().parent
    cfg["base_dir"] = str(here)
    cfg["config_file"] = source
    overrides = {
        ("train", "max_steps"): args.max_steps,
        ("train", "global_batch_size"): args.global_batch_size,
        ("train", "seed"): args.seed,
        ("train", "log_every"): args.log_every,
        ("checkpoint", "every"): args.checkpoint_every,
        ("checkpoint", "dir"): args.checkpoint_dir and str(args.checkpoint_dir),
    }
    for (section, key), value in overrides.items():
        if value is not None:
            cfg[section][key] = value
    check_options(cfg, source)
    cfg["checkpoint"]["dir"] = str(here / cfg["checkpoint"]["dir"])  # absolute paths stay as-is
    cfg["checkpointing"] = not args.no_checkpoint
    cfg["device"] = args.device or default_device()
    cfg["log_json"] = args.log_json
    return cfg


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_options(cfg: dict, source: str) -> None:
    """Refuse nonsense before any process group or model exists."""

    def bad(key: str, rule: str) -> ConfigError:
        section, name = key.split(".")
        return ConfigError(f"{source}: {key} must be {rule}, not {cfg[section][name]!r}")

    def get(key: str):
        section, name = key.split(".")
        return cfg[section][name]

    positive = [
        "data.seq_len",
        "data.micro_batch",
        "data.num_samples",
        "optim.grad_accum",
        "train.max_steps",
        "train.log_every",
        "checkpoint.keep",
        "eval.batches",
        "eval.max_new_tokens",
        "profile.steps",
    ]
    at_least_zero = [
        "checkpoint.every",
        "optim.warmup_steps",
        "data.num_workers",
        "eval.every",
        "profile.memory_snapshot_steps",
    ]
    for keys, minimum, rule in [
        (positive, 1, "a positive integer"),
        (at_least_zero, 0, "an integer >= 0"),
    ]:
        for key in keys:
            if not _integer(get(key)) or get(key) < minimum:
                raise bad(key, rule)
    for key in ["train.global_batch_size", "optim.decay_steps", "profile.start_step"]:
        if get(key) is not None and (not _integer(get(key)) or get(key) < 1):
            raise bad(key, "a positive integer or null")
    if not _integer(get("train.seed")):
        raise bad("train.seed", "an integer")
    for key in ["optim.lr", "optim.eps"]:
        if not _number(get(key)) or get(key) <= 0:
            raise bad(key, "a positive number")
    if not _number(get("optim.weight_decay")) or get("optim.weight_decay") < 0:
        raise bad("optim.weight_decay", "a number >= 0")
    clip = get("optim.grad_clip")
    if clip is not None and (not _number(clip) or clip <= 0):
        raise bad("optim.grad_clip", "a positive number, or null for no clipping")
    ratio = get("optim.min_lr_ratio")
    if not _number(ratio) or not 0 <= ratio <= 1:
        raise bad("optim.min_lr_ratio", "a number from 0 to 1")
    betas = get("optim.betas")
    if not (
        isinstance(betas, list)
        and len(betas) == 2
        and all(_number(b) and 0 <= b < 1 for b in betas)
    ):
        raise bad("optim.betas", "two numbers in [0, 1), like [0.9, 0.95]")
    fraction = get("data.val_fraction")
    if not _number(fraction) or not 0 <= fraction < 1:
        raise bad("data.val_fraction", "a number in [0, 1)")
    if get("fsdp.precision") not in ("bf16", "fp16", "fp32"):
        raise bad("fsdp.precision", "bf16, fp16 or fp32")
    if get("fsdp.version") not in (1, 2):
        raise bad("fsdp.version", "1 or 2")
    if get("fsdp.activation_checkpointing") not in (False, True, "full", "selective"):
        raise bad("fsdp.activation_checkpointing", 'false, true, "full" or "selective"')
    for key in [
        "fsdp.cpu_offload",
        "fsdp.reshard_after_forward",
        "fsdp.compile",
        "checkpoint.best",
    ]:
        if not isinstance(get(key), bool):
            raise bad(key, "true or false")
    if not _integer(get("fsdp.replicate")) or get("fsdp.replicate") < 1:
        raise bad("fsdp.replicate", "a positive integer")
    if get("fsdp.replicate") > 1 and get("fsdp.version") != 2:
        raise bad("fsdp.replicate", "1 with fsdp.version 1 (HSDP here is FSDP2's 2-D mesh)")
    if get("data.kind") not in DATA_KINDS:
        raise bad("data.kind", " | ".join(DATA_KINDS))
    if not isinstance(get("data.streaming"), bool):
        raise bad("data.streaming", "true or false")
    if get("data.streaming") and get("data.kind") != "hf":
        raise bad("data.streaming", f"false for data.kind {get('data.kind')!r} (only 'hf' streams)")
    if get("data.streaming") and get("data.val_fraction"):
        raise bad(
            "data.val_fraction", "0 with data.streaming (a stream has no length; use val_split)"
        )
    if get("data.streaming") and get("data.num_workers"):
        raise bad("data.num_workers", "0 with data.streaming (the stream is read in train.py)")
    if get("data.kind") != "synthetic" and not get("data.path"):
        raise bad("data.path", f"set for data.kind {get('data.kind')!r}")
    for key in ["data.text_field", "data.split", "checkpoint.dir", "profile.dir"]:
        if not isinstance(get(key), str) or not get(key):
            raise bad(key, "a non-empty string")
    for key in ["eval.prompt", "data.val_split", "data.tokenizer", "tracking.tensorboard"]:
        if get(key) is not None and (not isinstance(get(key), str) or not get(key)):
            raise bad(key, "a non-empty string or null")
    if get("tracking.wandb") is not None and not isinstance(get("tracking.wandb"), str):
        raise bad("tracking.wandb", "a W&B project name or null")
    if get("checkpoint.best") and not get("eval.every"):
        raise bad("checkpoint.best", "false when eval.every is 0 (there is no validation loss)")
    peak = cfg["peak_flops"]
    if peak is not None and (not _number(peak) or peak <= 0):
        raise ConfigError(f"{source}: peak_flops must be a positive number or null, not {peak!r}")
    model = cfg["model"]
    if not model["config"] and not model["name_or_path"]:
        raise bad("model.config", "set when model.name_or_path is null")


def check_world(cfg: dict, world: int) -> None:
    """The options that depend on the number of ranks (known from torchrun's environment)."""
    replicate = cfg["fsdp"]["replicate"]
    if world % replicate:
        raise ConfigError(
            f"{cfg['config_file']}: fsdp.replicate {replicate} does not divide the world size "
            f"{world}"
        )


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def micro_batches(global_batch: int, micro_batch: int, world: int, source: str) -> tuple[int, int]:
    """(sequences per micro-batch, micro-batches per step) that make ``global_batch`` on
    ``world`` ranks: the fewest micro-batches whose size is at most ``micro_batch``."""
    if global_batch % world:
        raise ConfigError(
            f"{source}: train.global_batch_size {global_batch} is not a multiple of the world "
            f"size {world}"
        )
    per_rank = global_batch // world
    accum = -(-per_rank // micro_batch)
    while per_rank % accum:
        accum += 1
    return per_rank // accum, accum
