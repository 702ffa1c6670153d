"""Checkpoints: sharded (DCP), written aside, committed by rename + marker, resharded on load.

``dir/step_N`` holds the model, the optimizer and the trainer state (schedule, data position,
scaler, batch size, every rank's generators); ``dir/best`` holds the model of the lowest
validation loss so far. A folder without its ``COMPLETE`` marker is never read.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from options import ConfigError
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)

COMPLETE = "COMPLETE"  # the marker file of a finished checkpoint
TRAINER_STATE = "trainer_state.json"
BEST = "best"
CKPT_NAME = re.compile(r"^step_(\d{8})$")


def check_writable(root: Path, source: str) -> None:
    """Fail now, not at the first save hours later, if checkpoints cannot be written."""
    probe = root / f".probe-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"{source}: checkpoint.dir {root}: cannot write there ({exc.strerror or exc})"
        ) from None


def complete_checkpoints(root: Path) -> list[Path]:
    """Finished checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if CKPT_NAME.match(p.name) and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: p.name)


def latest_trainer_state(root: Path) -> dict | None:
    """The trainer state of the newest complete checkpoint (read before anything is built:
    the batch size and the schedule of a resumed run come from its first start)."""
    done = complete_checkpoints(root)
    if not done:
        return None
    state = json.loads((done[-1] / TRAINER_STATE).read_text())
    state["path"] = str(done[-1])
    return state


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


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_marker(folder: Path, text: str) -> None:
    with open(folder / COMPLETE, "w") as marker:
        marker.write(text)
        marker.flush()
        os.fsync(marker.fileno())


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
        (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=1))
        write_marker(tmp, f"step {step}\n")
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        fsync_dir(root)
        for old in complete_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return final


def save_best(root: Path, step: int, model, val_loss: float) -> Path:
    """Replace ``root/best`` with the current model (weights only), atomically."""
    rank = dist.get_rank()
    final, tmp, old = root / BEST, root / f".tmp-{BEST}", root / f".old-{BEST}"
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=tmp)
    dist.barrier()
    if rank == 0:
        (tmp / TRAINER_STATE).write_text(json.dumps({"step": step, "val_loss": val_loss}))
        write_marker(tmp, f"best at step {step}\n")
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.rename(final, old)
        os.rename(tmp, final)
        fsync_dir(root)
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
        for stale in root.glob(".tmp-*"):  # leftovers of a save that was interrupted
            shutil.rmtree(stale, ignore_errors=True)
        if (root / f".old-{BEST}").is_dir() and not (root / BEST).exists():
            os.rename(root / f".old-{BEST}", root / BEST)  # a best save stopped mid-swap
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
    trainer = json.loads((path / TRAINER_STATE).read_text())
    rng_file = path / f"rng_rank{rank:05d}.pt"
    if trainer["world_size"] == dist.get_world_size() and rng_file.is_file():
        set_rng_state(torch.load(rng_file, weights_only=False))
    else:  # another world size: fresh per-rank generators, derived from the step
        torch.manual_seed(trainer["seed"] + 7919 * trainer["step"] + rank)
    trainer["path"] = str(path)
    return trainer
