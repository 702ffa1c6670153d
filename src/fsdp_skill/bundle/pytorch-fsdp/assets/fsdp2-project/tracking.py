"""Watching a run: log records to JSON lines, TensorBoard and W&B, a progress bar, MFU, and
the profiler and memory-snapshot windows. Everything here runs on rank 0 unless it says not.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import torch
from options import ConfigError

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, FLOP/s per device.
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "A100": 312e12,
}


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


class Sinks:
    """Where the records of logged steps go: JSON lines on stdout (``--log-json``), a
    TensorBoard folder and a W&B run (``tracking`` in the config; each package optional)."""

    def __init__(self, cfg: dict, enabled: bool) -> None:
        self.json = enabled and cfg["log_json"]
        self.tensorboard = self.wandb = None
        if not enabled:
            return
        track, source = cfg["tracking"], cfg["config_file"]
        if track["tensorboard"]:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise ConfigError(
                    f"{source}: tracking.tensorboard needs the tensorboard package "
                    "(pip install tensorboard)"
                ) from None
            self.tensorboard = SummaryWriter(str(Path(cfg["base_dir"]) / track["tensorboard"]))
        if track["wandb"]:
            try:
                import wandb
            except ImportError:
                raise ConfigError(
                    f"{source}: tracking.wandb needs the wandb package (pip install wandb)"
                ) from None
            options = {k: v for k, v in cfg.items() if isinstance(v, dict)}
            try:
                self.wandb = wandb.init(project=track["wandb"], config=options)
            except wandb.errors.Error as exc:  # not logged in, no network: say so in one line
                raise ConfigError(
                    f"{source}: tracking.wandb: {exc} (or WANDB_MODE=offline)"
                ) from None

    def write(self, record: dict) -> None:
        if self.json:
            print(json.dumps(record), flush=True)
        scalars = {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
        if self.tensorboard is not None:
            for key, value in scalars.items():
                self.tensorboard.add_scalar(key, value, record["step"])
        if self.wandb is not None:
            self.wandb.log(scalars, step=record["step"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()


class Progress:
    """A progress bar on rank 0 when stderr is a terminal; plain log lines otherwise."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self.enabled, self.bar = enabled, None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)
            except ImportError:
                pass

    def update(self, step: int, text: str) -> None:
        if self.bar is not None:
            self.bar.n = step
            self.bar.set_postfix_str(text, refresh=True)
        elif self.enabled:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Windows:
    """The profiler trace and the CUDA memory snapshot, each over a few steps (every rank)."""

    def __init__(self, cfg: dict, device: torch.device, rank: int, first_step: int) -> None:
        profile = cfg["profile"]
        self.rank, self.device = rank, device
        self.folder = Path(cfg["base_dir"]) / profile["dir"]
        self.start, self.steps = profile["start_step"], profile["steps"]
        self.profiler = None
        self.snapshot_at = None
        if profile["memory_snapshot_steps"]:
            if device.type != "cuda":
                if rank == 0:
                    print("profile.memory_snapshot_steps is ignored: CUDA only", file=sys.stderr)
            else:
                # Records every allocation with its Python stack; dumped as a pickle to open
                # at https://pytorch.org/memory_viz.
                torch.cuda.memory._record_memory_history(max_entries=100_000)
                self.snapshot_at = first_step + profile["memory_snapshot_steps"]

    def before_step(self, step: int) -> None:
        """``step`` is the number of the step about to run (1-based)."""
        if self.start is not None and step == self.start:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(ProfilerActivity.CUDA)
            self.profiler = profile(activities=activities, record_shapes=True)
            self.profiler.__enter__()

    def after_step(self, step: int) -> None:
        if self.profiler is not None and step == self.start + self.steps - 1:
            self.profiler.__exit__(None, None, None)
            self.folder.mkdir(parents=True, exist_ok=True)
            trace = self.folder / f"trace_step{self.start}_rank{self.rank}.json"
            self.profiler.export_chrome_trace(str(trace))
            self.profiler = None
            if self.rank == 0:
                print(f"profiler trace written to {trace}", file=sys.stderr, flush=True)
        if self.snapshot_at is not None and step == self.snapshot_at:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"memory_step{step}_rank{self.rank}.pickle"
            torch.cuda.memory._dump_snapshot(str(path))
            torch.cuda.memory._record_memory_history(enabled=None)
            self.snapshot_at = None
