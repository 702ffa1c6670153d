"""Train a Hugging Face causal language model with FSDP2 (or FSDP1), resumably.

One file, read top to bottom: options -> process group -> model (built on the meta device,
initialised one block at a time, sharded) -> data (a sampler that gives every rank the same
number of batches) -> optimizer and schedule -> checkpoints (sharded, atomic, resharding on
load) -> the training loop. The same file runs on CPU with gloo and on GPUs with NCCL:

    torchrun --standalone --nproc-per-node=2 train.py --config train_config.json --device cpu

Options live in the JSON config (see DEFAULTS below); the command line overrides a few.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.utils.data import DataLoader, Dataset, DistributedSampler

# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------

DEFAULTS: dict = {
    # A Hugging Face model config (JSON with "model_type"; random init), or a local checkpoint
    # folder / hub name to load weights from. Paths are relative to the config file.
    "model": {"config": "model_config.json", "name_or_path": None, "attn_implementation": "sdpa"},
    "fsdp": {
        "version": 2,  # 2: fully_shard (per-parameter DTensor sharding); 1: FullyShardedDataParallel
        "precision": "bf16",  # bf16 | fp16 (with a gradient scaler) | fp32
        "cpu_offload": False,  # keep sharded parameters, gradients and optimizer state on CPU
        "activation_checkpointing": False,  # recompute each block's activations in backward
        "reshard_after_forward": True,  # False: keep parameters gathered until backward (faster)
    },
    "data": {
        "kind": "synthetic",  # synthetic | text (a .txt file or a .jsonl file with a text field)
        "path": None,
        "text_field": "text",
        "tokenizer": None,  # a local tokenizer folder; None: UTF-8 bytes are the tokens
        "seq_len": 256,
        "num_samples": 100_000,  # synthetic only
        "micro_batch": 8,  # sequences per rank per forward/backward
        "num_workers": 0,
    },
    "optim": {
        "lr": 1e-3,  # for the small default model; larger models usually want 1e-4 to 3e-4
        "weight_decay": 0.1,
        "betas": [0.9, 0.95],
        "eps": 1e-8,
        "grad_clip": 1.0,
        "grad_accum": 1,  # micro-batches per optimizer step
        "warmup_steps": 10,
        "decay_steps": None,  # length of the cosine schedule; None: max_steps
        "min_lr_ratio": 0.1,
    },
    "train": {"max_steps": 1000, "seed": 1234, "log_every": 10},
    "checkpoint": {"dir": "checkpoints", "every": 500, "keep": 3},
    # Dense bf16 FLOP/s of one device for MFU; None: looked up from the device name (CUDA only).
    "peak_flops": None,
}

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, FLOP/s per device.
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "A100": 312e12,
}

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
COMPLETE = "COMPLETE"  # the marker file of a finished checkpoint
CKPT_NAME = re.compile(r"^step_(\d{8})$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config", type=Path, default=Path(__file__).with_name("train_config.json")
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--checkpoint-dir", type=Path, default=None)
    parser.add_argument("--checkpoint-every", type=int, default=None)
    parser.add_argument(
        "--no-checkpoint", action="store_true", help="neither resume nor save (benchmarks)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--log-every", type=int, default=None)
    parser.add_argument("--log-json", action="store_true", help="one JSON line per logged step")
    return parser.parse_args(argv)


def merge(base: dict, override: dict) -> dict:
    """``base`` updated by ``override``, section by section; unknown keys are errors."""
    out = json.loads(json.dumps(base))
    for key, value in override.items():
        if key not in base:
            raise SystemExit(f"train.py: unknown config key {key!r}")
        if isinstance(base[key], dict):
            unknown = set(value) - set(base[key])
            if unknown:
                raise SystemExit(f"train.py: unknown config keys in {key!r}: {sorted(unknown)}")
            out[key].update(value)
        else:
            out[key] = value
    return out


def load_options(args: argparse.Namespace) -> dict:
    if not args.config.is_file():
        raise SystemExit(f"train.py: config file {args.config} not found")
    cfg = merge(DEFAULTS, json.loads(args.config.read_text()))
    here = args.config.resolve().parent
    cfg["base_dir"] = str(here)
    if args.max_steps is not None:
        cfg["train"]["max_steps"] = args.max_steps
    if args.seed is not None:
        cfg["train"]["seed"] = args.seed
    if args.log_every is not None:
        cfg["train"]["log_every"] = args.log_every
    if args.checkpoint_dir is not None:
        cfg["checkpoint"]["dir"] = str(args.checkpoint_dir)
    if args.checkpoint_every is not None:
        cfg["checkpoint"]["every"] = args.checkpoint_every
    cfg["checkpoint"]["dir"] = str(here / cfg["checkpoint"]["dir"])  # absolute paths stay as-is
    cfg["checkpointing"] = not args.no_checkpoint
    cfg["device"] = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cfg["log_json"] = args.log_json
    check_options(cfg)
    return cfg


def check_options(cfg: dict) -> None:
    """Refuse nonsense before any process group or model exists."""
    positive = [
        ("data", "seq_len"),
        ("data", "micro_batch"),
        ("optim", "grad_accum"),
        ("train", "max_steps"),
        ("train", "log_every"),
        ("checkpoint", "keep"),
    ]
    for section, key in positive:
        value = cfg[section][key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SystemExit(f"train.py: {section}.{key} must be a positive integer, not {value!r}")
    for section, key in [("checkpoint", "every"), ("optim", "warmup_steps")]:
        value = cfg[section][key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SystemExit(f"train.py: {section}.{key} must be an integer >= 0, not {value!r}")
    if not (isinstance(cfg["optim"]["lr"], (int, float)) and cfg["optim"]["lr"] > 0):
        raise SystemExit(
            f"train.py: optim.lr must be a positive number, not {cfg['optim']['lr']!r}"
        )
    if cfg["fsdp"]["precision"] not in ("bf16", "fp16", "fp32"):
        raise SystemExit("train.py: fsdp.precision must be bf16, fp16 or fp32")
    if cfg["fsdp"]["version"] not in (1, 2):
        raise SystemExit("train.py: fsdp.version must be 1 or 2")


# ---------------------------------------------------------------------------------------------
# Process group
# ---------------------------------------------------------------------------------------------


def setup_distributed(device_type: str, cpu_offload: bool) -> tuple[int, int, torch.device]:
    """Join the job started by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT)."""
    if "RANK" not in os.environ:  # `python train.py`: a job of one process
        single = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
        os.environ.update(single, MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if device_type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        # With CPU offload, gradients live in CPU memory and their norm is reduced there:
        # CPU tensors need gloo, CUDA tensors NCCL, so the group gets one backend per device.
        backend = "cpu:gloo,cuda:nccl" if cpu_offload else "nccl"
        # device_id binds this process to its GPU and creates the NCCL communicator eagerly.
        dist.init_process_group(backend, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return rank, world, device


def log0(*parts: object) -> None:
    """Print on rank 0 only (to stderr, so stdout stays clean for --log-json)."""
    if dist.get_rank() == 0:
        print(*parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Model: meta-device construction, block-by-block initialisation, sharding
# ---------------------------------------------------------------------------------------------


def load_hf_config(cfg: dict):
    from transformers import AutoConfig

    if cfg["model"]["name_or_path"]:
        return AutoConfig.from_pretrained(resolve(cfg, cfg["model"]["name_or_path"]))
    fields = json.loads(Path(resolve(cfg, cfg["model"]["config"])).read_text())
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def resolve(cfg: dict, path: str) -> str:
    """A path relative to the config file, or a hub name left as it is."""
    candidate = Path(cfg["base_dir"]) / path
    return str(candidate) if candidate.exists() else path


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks to shard one by one (Hugging Face names them in _no_split_modules)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:  # fall back to the longest ModuleList of identical modules
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
        lists = [m for m in lists if len({type(c) for c in m}) == 1]
        blocks = list(max(lists, key=len)) if lists else []
    if not blocks:
        raise SystemExit("train.py: found no transformer blocks to shard in this model")
    return blocks


def materialize_(model: torch.nn.Module, module: torch.nn.Module, device: torch.device) -> None:
    """Give ``module``'s own meta tensors storage on ``device`` and initialise them.

    Initialisation uses the model's own ``_init_weights`` (Hugging Face's per-module scheme,
    which also recomputes buffers such as rotary frequencies). Each rank draws the full,
    unsharded tensors from the same seeded generator, so the initial model does not depend
    on the world size.
    """
    own = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
    if not any(t.is_meta for t in own):
        return
    module.to_empty(device=device, recurse=False)
    with torch.no_grad():
        model._init_weights(module)


def mixed_precision(precision: str) -> tuple[torch.dtype | None, torch.dtype | None]:
    """(parameter dtype for compute, gradient reduction dtype)."""
    low = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[precision]
    return low, (torch.float32 if low is not None else None)


def build_model(cfg: dict, device: torch.device, world: int) -> torch.nn.Module:
    import transformers
    from transformers import AutoModelForCausalLM

    if int(transformers.__version__.split(".")[0]) < 5:
        # Older _init_weights leaves buffers such as rotary frequencies uninitialised after
        # meta-device construction, which would train a silently broken model.
        raise SystemExit("train.py: needs transformers 5 or newer (pip install -U transformers)")

    hf_config = load_hf_config(cfg)
    # Meta device: the structure without any storage, so no rank ever holds the whole model.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            hf_config, dtype=torch.float32, attn_implementation=cfg["model"]["attn_implementation"]
        )
    if cfg["fsdp"]["activation_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False  # no KV cache in training
    torch.manual_seed(cfg["train"]["seed"])  # the same initial weights on every rank
    if cfg["fsdp"]["version"] == 2:
        model = shard_fsdp2(model, cfg, device, world)
    else:
        model = shard_fsdp1(model, cfg, device)
    if cfg["model"]["name_or_path"]:
        load_pretrained_weights(model, cfg)
    return model


def shard_fsdp2(model, cfg: dict, device: torch.device, world: int) -> torch.nn.Module:
    """fully_shard each transformer block, then the root (embeddings, final norm, head)."""
    mesh = init_device_mesh(device.type, (world,))
    param_dtype, reduce_dtype = mixed_precision(cfg["fsdp"]["precision"])
    offload: OffloadPolicy = OffloadPolicy()
    if cfg["fsdp"]["cpu_offload"]:
        offload = CPUOffloadPolicy(pin_memory=device.type == "cuda")
    mp_policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    for block in transformer_blocks(model):
        for module in block.modules():  # one block at a time holds full-size tensors
            materialize_(model, module, device)
        fully_shard(
            block,
            mesh=mesh,
            mp_policy=mp_policy,
            offload_policy=offload,
            reshard_after_forward=cfg["fsdp"]["reshard_after_forward"],
        )
    for module in model.modules():  # what is left: embeddings, final norm, head, rotary
        materialize_(model, module, device)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()  # materializing module by module broke the sharing
    # The root's parameters are needed right after forward (the head) and first in backward.
    fully_shard(
        model, mesh=mesh, mp_policy=mp_policy, offload_policy=offload, reshard_after_forward=False
    )
    return model


def shard_fsdp1(model, cfg: dict, device: torch.device) -> torch.nn.Module:
    """FullyShardedDataParallel with one unit per transformer block (the older API)."""
    from torch.distributed.fsdp import CPUOffload, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    param_dtype, reduce_dtype = mixed_precision(cfg["fsdp"]["precision"])
    block_types = {type(b) for b in transformer_blocks(model)}
    offload = cfg["fsdp"]["cpu_offload"]
    if offload and device.type == "cpu":  # FSDP1 offloads only from an accelerator
        log0("fsdp.cpu_offload is ignored: FSDP1 offloads only when training on an accelerator")
        offload = False
    tied = getattr(model.config, "tie_word_embeddings", False)

    def init_fn(module: torch.nn.Module) -> None:
        materialize_(model, module, device)
        if tied and module is model:
            model.tie_weights()

    return FSDP(
        model,
        auto_wrap_policy=partial(transformer_auto_wrap_policy, transformer_layer_cls=block_types),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        mixed_precision=MixedPrecision(
            param_dtype=param_dtype, reduce_dtype=reduce_dtype, buffer_dtype=None
        )
        if param_dtype
        else None,
        cpu_offload=CPUOffload(offload_params=offload),
        device_id=device,
        param_init_fn=init_fn,
        use_orig_params=True,
    )


def load_pretrained_weights(model: torch.nn.Module, cfg: dict) -> None:
    """Rank 0 reads the checkpoint on CPU; the shards reach every rank by broadcast."""
    from transformers import AutoModelForCausalLM

    full = {}
    if dist.get_rank() == 0:
        source = resolve(cfg, cfg["model"]["name_or_path"])
        full = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).state_dict()
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, full, options=options)


def flops_per_token(model: torch.nn.Module, seq_len: int) -> float:
    """Training FLOPs per token: 6 x matmul parameters + attention scores (PaLM appendix B)."""
    config = model.config
    params = sum(p.numel() for p in model.parameters())  # global sizes, also when sharded
    params -= model.get_input_embeddings().weight.numel()  # a lookup, not a matmul
    if getattr(config, "tie_word_embeddings", False):
        params += model.get_input_embeddings().weight.numel()  # ...but the tied head is one
    layers, hidden = config.num_hidden_layers, config.hidden_size
    return 6 * params + 12 * layers * hidden * seq_len


# ---------------------------------------------------------------------------------------------
# Data: equal batch counts on every rank, a position that survives restarts
# ---------------------------------------------------------------------------------------------


class SyntheticTokens(Dataset):
    """Arithmetic token sequences, deterministic per index: learnable, so the loss falls."""

    def __init__(self, num_samples: int, seq_len: int, vocab: int, seed: int) -> None:
        self.num_samples, self.seq_len, self.vocab, self.seed = num_samples, seq_len, vocab, seed

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        start = int(torch.randint(self.vocab, (1,), generator=gen))
        stride = int(torch.randint(1, 8, (1,), generator=gen))
        return (start + stride * torch.arange(self.seq_len)) % self.vocab


class TokenChunks(Dataset):
    """A .txt or .jsonl file, tokenized once and cut into fixed-length sequences."""

    def __init__(self, cfg: dict, vocab: int) -> None:
        data = cfg["data"]
        path = Path(resolve(cfg, data["path"] or ""))
        if not path.is_file():
            raise SystemExit(f"train.py: data.path {data['path']!r} is not a file")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            docs = [json.loads(line)[data["text_field"]] for line in text.splitlines() if line]
        else:
            docs = [text]
        ids: list[int] = []
        if data["tokenizer"]:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(resolve(cfg, data["tokenizer"]))
            for doc in docs:
                ids += tok(doc)["input_ids"] + [tok.eos_token_id or 0]
        else:
            for doc in docs:
                ids += list(doc.encode("utf-8")) + [0]
        if max(ids, default=0) >= vocab:
            raise SystemExit(f"train.py: token id {max(ids)} >= the model's vocab size {vocab}")
        seq_len = data["seq_len"]
        usable = len(ids) // seq_len * seq_len
        if usable == 0:
            raise SystemExit(f"train.py: {path} holds fewer than seq_len={seq_len} tokens")
        self.chunks = torch.tensor(ids[:usable]).view(-1, seq_len)

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.chunks[index]


class ResumableSampler(DistributedSampler):
    """DistributedSampler that can start an epoch after ``start`` samples already seen.

    The epoch's global order (shuffled by seed + epoch, padded so it divides by the world
    size) does not depend on the world size, so a position saved at one world size is valid
    at another. Every rank gets the same number of samples: FSDP modules are not Joinable,
    so a rank that ran out of batches early would leave the others waiting in a collective.
    """

    def __init__(self, dataset: Dataset, world: int, rank: int, seed: int) -> None:
        super().__init__(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
        self.start = 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        super().set_epoch(epoch)
        self.start = start

    def _global_order(self) -> list[int]:
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=gen).tolist()
        padded = math.ceil(len(order) / self.num_replicas) * self.num_replicas
        order += order[: padded - len(order)]
        rest = order[self.start :]
        extra = -len(rest) % self.num_replicas  # a start from another world size may not divide
        return rest + rest[:extra]

    def __iter__(self) -> Iterator[int]:
        return iter(self._global_order()[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(self._global_order()) // self.num_replicas


class Batches:
    """Endless micro-batches across epochs, with the position (epoch, samples seen) to save."""

    def __init__(self, loader: DataLoader, sampler: ResumableSampler, world: int) -> None:
        self.loader, self.sampler, self.world = loader, sampler, world
        self.epoch, self.consumed = 0, 0  # consumed: global samples of this epoch already used
        self._it: Iterator | None = None

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.consumed = state["epoch"], state["consumed"]
        self._it = None

    def next(self) -> torch.Tensor:
        while True:
            if self._it is None:
                self.sampler.set_epoch(self.epoch, start=self.consumed)
                self._it = iter(self.loader)
            batch = next(self._it, None)
            if batch is not None:
                self.consumed += len(batch) * self.world  # same count on every rank
                return batch
            self.epoch, self.consumed, self._it = self.epoch + 1, 0, None


def build_data(cfg: dict, vocab: int, rank: int, world: int, device: torch.device) -> Batches:
    data = cfg["data"]
    if data["kind"] == "synthetic":
        dataset = SyntheticTokens(data["num_samples"], data["seq_len"], vocab, cfg["train"]["seed"])
    elif data["kind"] == "text":
        dataset = TokenChunks(cfg, vocab)
    else:
        raise SystemExit("train.py: data.kind must be synthetic or text")
    sampler = ResumableSampler(dataset, world, rank, cfg["train"]["seed"])
    loader = DataLoader(
        dataset,
        batch_size=data["micro_batch"],
        sampler=sampler,
        drop_last=False,  # the last batch may be short, but it is equally short on every rank
        num_workers=data["num_workers"],
        pin_memory=device.type == "cuda",
    )
    # Guard for custom samplers: every rank must run the same number of steps.
    counts = torch.tensor([len(loader), -len(loader)], device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    if counts[0] != -counts[1]:
        raise SystemExit("train.py: ranks disagree on the number of batches per epoch")
    return Batches(loader, sampler, world)


# ---------------------------------------------------------------------------------------------
# Optimizer and learning-rate schedule
# ---------------------------------------------------------------------------------------------


def build_optimizer(model: torch.nn.Module, cfg: dict, device: torch.device):
    opt = cfg["optim"]
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]  # norms, biases
    groups = [
        {"params": decay, "weight_decay": opt["weight_decay"]},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # The fused kernel does the whole update in a few launches; it needs the states on GPU.
    fused = device.type == "cuda" and not cfg["fsdp"]["cpu_offload"]
    optimizer = torch.optim.AdamW(
        groups, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"], fused=fused
    )
    total = opt["decay_steps"] or cfg["train"]["max_steps"]
    warmup, floor = opt["warmup_steps"], opt["min_lr_ratio"]

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)


# ---------------------------------------------------------------------------------------------
# Checkpoints: sharded (DCP), written aside, committed by rename + marker, resharded on load
# ---------------------------------------------------------------------------------------------


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def complete_checkpoints(root: Path) -> list[Path]:
    """Finished checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if CKPT_NAME.match(p.name) and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: p.name)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(root: Path, step: int, model, optimizer, extra: dict, keep: int) -> Path:
    """Write ``root/step_N`` so that a crash at any moment leaves the older ones intact.

    Every rank writes its shards into a hidden temporary folder; rank 0 then writes the
    trainer state and a COMPLETE marker and renames the folder into place. A folder without
    the marker, or with a temporary name, is never resumed from.
    """
    rank = dist.get_rank()
    final, tmp = root / f"step_{step:08d}", root / f".tmp-step_{step:08d}"
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=tmp)
    torch.save(rng_state(), tmp / f"rng_rank{rank:05d}.pt")  # each rank's own generators
    if os.environ.get("TRAIN_TEST_PAUSE_IN_SAVE") == str(step):  # test hook: die mid-save
        print(f"test hook: pausing inside the save of step {step}", flush=True)
        time.sleep(600)
    dist.barrier()  # every shard is on disk before the checkpoint is declared complete
    if rank == 0:
        state = dict(extra, step=step, world_size=dist.get_world_size())
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1))
        with open(tmp / COMPLETE, "w") as marker:
            marker.write(f"step {step}\n")
            marker.flush()
            os.fsync(marker.fileno())
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        fsync_dir(root)
        for old in complete_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return final


def load_checkpoint(root: Path, model, optimizer) -> dict | None:
    """Restore the newest complete checkpoint into the sharded model and optimizer.

    The loaded shards are laid out for the current world size by DCP, whatever world size
    wrote them. Returns the trainer state, or None when there is nothing to resume.
    """
    rank = dist.get_rank()
    latest: list[str | None] = [None]
    if rank == 0:
        for stale in root.glob(".tmp-step_*"):  # leftovers of a save that was interrupted
            shutil.rmtree(stale, ignore_errors=True)
        done = complete_checkpoints(root)
        latest = [str(done[-1]) if done else None]
    dist.broadcast_object_list(latest, src=0)  # every rank resumes from the same one
    if latest[0] is None:
        return None
    path = Path(latest[0])
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )
    trainer = json.loads((path / "trainer_state.json").read_text())
    rng_file = path / f"rng_rank{rank:05d}.pt"
    if trainer["world_size"] == dist.get_world_size() and rng_file.is_file():
        set_rng_state(torch.load(rng_file, weights_only=False))
    else:  # another world size: fresh per-rank generators, derived from the step
        torch.manual_seed(trainer["seed"] + 7919 * trainer["step"] + rank)
    trainer["path"] = str(path)
    return trainer


# ---------------------------------------------------------------------------------------------
# Logging
# ---------------------------------------------------------------------------------------------


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def device_peak_flops(cfg: dict, device: torch.device) -> float | None:
    if cfg["peak_flops"]:
        return float(cfg["peak_flops"])
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)


class Progress:
    """A progress bar on rank 0 when stderr is a terminal; plain log lines otherwise."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self.bar = None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)
            except ImportError:
                pass

    def update(self, record: dict, text: str) -> None:
        if self.bar is not None:
            self.bar.n = record["step"]
            self.bar.set_postfix_str(text, refresh=True)
        else:
            log0(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_options(args)
    rank, world, device = setup_distributed(cfg["device"], cfg["fsdp"]["cpu_offload"])
    stop = {"signal": 0}

    def request_stop(signum, _frame) -> None:  # acted on between steps, by all ranks together
        stop["signal"] = signum

    for sig in STOP_SIGNALS:
        signal.signal(sig, request_stop)

    model = build_model(cfg, device, world)
    precision, fsdp_version = cfg["fsdp"]["precision"], cfg["fsdp"]["version"]
    optimizer, scheduler = build_optimizer(model, cfg, device)
    scaler = ShardedGradScaler(device=device.type) if precision == "fp16" else None
    batches = build_data(cfg, model.config.vocab_size, rank, world, device)

    ckpt_root = Path(cfg["checkpoint"]["dir"])
    step = 0
    trainer = load_checkpoint(ckpt_root, model, optimizer) if cfg["checkpointing"] else None
    if trainer is not None:
        step = trainer["step"]
        scheduler.load_state_dict(trainer["scheduler"])
        batches.load_state_dict(trainer["data"])
        if scaler is not None and trainer.get("scaler"):
            scaler.load_state_dict(trainer["scaler"])
        log0(f"resumed from {trainer['path']} (step {step}, world size {trainer['world_size']})")
    else:
        torch.manual_seed(cfg["train"]["seed"] + rank)  # per-rank streams (dropout)

    def save() -> Path:
        extra = {
            "scheduler": scheduler.state_dict(),
            "data": batches.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "seed": cfg["train"]["seed"],
        }
        path = save_checkpoint(ckpt_root, step, model, optimizer, extra, cfg["checkpoint"]["keep"])
        log0(f"saved checkpoint {path}")
        return path

    max_steps, accum = cfg["train"]["max_steps"], cfg["optim"]["grad_accum"]
    log_every, every = cfg["train"]["log_every"], cfg["checkpoint"]["every"]
    seq_len = cfg["data"]["seq_len"]
    flops_token, peak = flops_per_token(model, seq_len), device_peak_flops(cfg, device)
    progress = Progress(max_steps, step, enabled=rank == 0 and not cfg["log_json"])
    extras = [("CPU offload", cfg["fsdp"]["cpu_offload"])]
    extras.append(("activation checkpointing", cfg["fsdp"]["activation_checkpointing"]))
    log0(
        f"FSDP{fsdp_version} {precision}{''.join(f' + {n}' for n, on in extras if on)} "
        f"on {world} x {device.type}: "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{flops_token:.3g} FLOP/token"
    )

    model.train()
    saved_at, window_tokens, window_start = step, 0, time.perf_counter()
    while step < max_steps:
        loss_sum, tokens = torch.zeros((), device=device), 0
        for micro in range(accum):
            input_ids = batches.next().to(device, non_blocking=True)
            last = micro == accum - 1
            # Reduce-scatter gradients only on the last micro-batch of the step.
            if fsdp_version == 2:
                model.set_requires_gradient_sync(last)
                loss = model(input_ids=input_ids, labels=input_ids).loss / accum
            else:
                with model.no_sync() if not last else nullcontext():
                    loss = model(input_ids=input_ids, labels=input_ids).loss / accum
            (scaler.scale(loss) if scaler is not None else loss).backward()
            loss_sum += loss.detach().float()
            tokens += input_ids.numel()

        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        if fsdp_version == 2:
            grad_norm = torch.nn.utils.clip_grad_norm_(
                model.parameters(), cfg["optim"]["grad_clip"]
            )
            grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        else:
            grad_norm = model.clip_grad_norm_(cfg["optim"]["grad_clip"])
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        window_tokens += tokens * world

        # One small all-reduce per step: the mean loss, and whether any rank was told to stop.
        flag = torch.tensor(float(stop["signal"] != 0), device=device)
        shared = torch.stack([loss_sum, flag])
        dist.all_reduce(shared)
        loss_total, stop_votes = shared.tolist()
        loss_value, stopping = loss_total / world, stop_votes > 0

        if step % log_every == 0 or step == max_steps or stopping:
            elapsed = time.perf_counter() - window_start
            tokens_per_s = window_tokens / elapsed
            mfu = tokens_per_s * flops_token / (peak * world) if peak else None
            record = {
                "step": step,
                "loss": loss_value,
                "lr": scheduler.get_last_lr()[0],
                "grad_norm": float(grad_norm),
                "tokens_per_s": tokens_per_s,
                "mfu": mfu,
                "peak_memory_bytes": peak_memory_bytes(device),
                "epoch": batches.epoch,
            }
            if rank == 0 and cfg["log_json"]:
                print(json.dumps(record), flush=True)
            text = (
                f"step {step}/{max_steps} | loss {loss_value:.4f} | lr {record['lr']:.2e} | "
                f"{tokens_per_s:,.0f} tok/s"
                + (f" | MFU {mfu:.1%}" if mfu is not None else "")
                + f" | peak {record['peak_memory_bytes'] / 2**30:.2f} GiB"
            )
            progress.update(record, text)
            window_tokens, window_start = 0, time.perf_counter()

        if cfg["checkpointing"] and every and step % every == 0:
            save()
            saved_at = step
        if stopping:
            log0(f"stop requested by a signal at step {step}: saving and exiting")
            break

    if (
        cfg["checkpointing"] and saved_at != step
    ):  # the last state is never lost: at the end, or when told to stop
        save()
    progress.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
