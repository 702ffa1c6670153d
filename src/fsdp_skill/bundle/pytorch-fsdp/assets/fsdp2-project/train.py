"""Train a Hugging Face causal language model with FSDP2 (or FSDP1), resumably.

Read top to bottom: options and every check that needs no GPU -> process group and mesh ->
data -> model (built on the meta device, initialised and sharded one block at a time) ->
optimizer and schedule -> resume -> the training loop (step, one reduce, log, evaluate, save).
The parts with one job each live beside this file: options.py, data.py, model.py,
checkpoint.py and tracking.py. The same program runs on CPU with gloo and on GPUs with NCCL:

    torchrun --standalone --nproc-per-node=2 train.py --config train_config.json --device cpu
"""

from __future__ import annotations

import gc
import math
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from checkpoint import (
    check_writable,
    latest_trainer_state,
    load_checkpoint,
    save_best,
    save_checkpoint,
)
from data import (
    Tokenizer,
    build_datasets,
    check_sources,
    project_tokenizer,
    training_batches,
    validation_batches,
)
from model import (
    build_model,
    check_model_options,
    load_hf_config,
    model_source,
    original_name,
)
from options import (
    ConfigError,
    check_world,
    load_options,
    micro_batches,
    parse_args,
    run,
    world_size_from_env,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from tracking import Progress, Sinks, Windows, device_peak_flops, peak_memory_bytes

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)  # SIGUSR1: SLURM's warning before the limit


# ---------------------------------------------------------------------------------------------
# Process group
# ---------------------------------------------------------------------------------------------


def setup_distributed(cfg: dict) -> tuple[int, int, torch.device, DeviceMesh | None]:
    """Join the job started by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT).

    Returns (rank, world size, device, mesh): FSDP2's mesh is 1-D (shard) or, with
    ``fsdp.replicate`` > 1, 2-D (replicate, shard) for HSDP; FSDP1 uses the default group.
    """
    if "RANK" not in os.environ:  # `python train.py`: a job of one process
        single = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
        os.environ.update(single, MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if cfg["device"] == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        # With CPU offload, gradients live in CPU memory and their norm is reduced there:
        # CPU tensors need gloo, CUDA tensors NCCL, so the group gets one backend per device.
        backend = "cpu:gloo,cuda:nccl" if cfg["fsdp"]["cpu_offload"] else "nccl"
        # device_id binds this process to its GPU and creates the NCCL communicator eagerly.
        dist.init_process_group(backend, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    mesh = None
    if cfg["fsdp"]["version"] == 2:
        replicate = cfg["fsdp"]["replicate"]
        if replicate > 1:
            shape, names = (replicate, world // replicate), ("replicate", "shard")
        else:
            shape, names = (world,), ("shard",)
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=names)
    return rank, world, device, mesh


def close_distributed(mesh: DeviceMesh | None) -> None:
    """Tear the process groups down now, while the interpreter is whole.

    torch 2.13's DeviceMesh keeps its ProcessGroup objects (``_pg_registry``), and DTensor's
    sharding caches keep the mesh alive after ``destroy_process_group``. The Gloo group, with
    its worker threads, would then be destroyed during interpreter exit, which now and then
    aborts the process after training finished ("terminate called without an active
    exception", SIGABRT). Dropping those references and collecting joins the threads here.
    """
    dist.barrier()
    dist.destroy_process_group()
    if mesh is not None:
        getattr(mesh, "_pg_registry", {}).clear()
    gc.collect()


def log0(*parts: object) -> None:
    """Print on rank 0 only (to stderr, so stdout stays clean for --log-json)."""
    if dist.get_rank() == 0:
        print(*parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Optimizer, schedule, evaluation, sampling
# ---------------------------------------------------------------------------------------------


def build_optimizer(model, cfg: dict, device: torch.device, total: int, matrices: set[str]):
    """AdamW (weight decay on ``matrices`` only, not on norms and biases) and warm-up + cosine
    over ``total`` steps."""
    opt = cfg["optim"]
    named = [(original_name(n), p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in named if n in matrices]
    no_decay = [p for n, p in named if n not in matrices]
    groups = [
        {"params": decay, "weight_decay": opt["weight_decay"]},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # An empty group would lose its settings in a checkpoint round trip (set_state_dict).
    groups = [g for g in groups if g["params"]]
    # The fused kernel does the whole update in a few launches; it needs the states on GPU.
    fused = device.type == "cuda" and not cfg["fsdp"]["cpu_offload"]
    optimizer = torch.optim.AdamW(
        groups, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"], fused=fused
    )
    warmup, floor = opt["warmup_steps"], opt["min_lr_ratio"]

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)


def clip_gradients(model: torch.nn.Module, max_norm: float | None, fsdp_version: int):
    """Clip the total gradient norm to ``max_norm`` (None: only measure it); returns the norm."""
    limit = float("inf") if max_norm is None else max_norm
    if fsdp_version == 1:
        return model.clip_grad_norm_(limit)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), limit)
    return norm.full_tensor() if hasattr(norm, "full_tensor") else norm


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: list[torch.Tensor], device: torch.device) -> float:
    """Mean validation loss per token over every rank's batches, with one all-reduce."""
    model.eval()
    totals = torch.zeros(2, device=device, dtype=torch.float64)
    for input_ids in batches:
        input_ids = input_ids.to(device, non_blocking=True)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        predicted = input_ids.shape[0] * (input_ids.shape[1] - 1)  # labels are shifted by one
        totals += torch.stack([loss.double() * predicted, totals.new_tensor(predicted)])
    dist.all_reduce(totals)
    model.train()
    return float(totals[0] / totals[1])


@torch.no_grad()
def sample(model, tokenizer: Tokenizer, prompt: str, new_tokens: int, context: int, device) -> str:
    """Greedy continuation of ``prompt``. Every rank runs it: each forward is collective."""
    model.eval()
    ids = torch.tensor([tokenizer.encode_prompt(prompt) or [tokenizer.eos]], device=device)
    start = ids.shape[1]
    for _ in range(new_tokens):
        logits = model(input_ids=ids[:, -context:]).logits[:, -1]
        ids = torch.cat([ids, logits.argmax(dim=-1, keepdim=True)], dim=1)
    model.train()
    return tokenizer.decode(ids[0, start:].tolist())


def requeue_slurm_job() -> None:
    """Put this SLURM job back in the queue after the save at the time limit's warning; it
    resumes from that checkpoint when it starts again."""
    job = os.environ["SLURM_JOB_ID"]
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
    except FileNotFoundError:
        print("cannot requeue the SLURM job: scontrol not found", file=sys.stderr)
        return
    status = "requeued" if done.returncode == 0 else f"not requeued ({done.stderr.strip()})"
    print(f"SLURM job {job} {status}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    cfg = load_options(parse_args(argv))
    # Every check that needs neither a process group nor a GPU comes first, on every rank.
    world = world_size_from_env()
    check_world(cfg, world)
    if cfg["device"] == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is visible (torch.cuda.is_available())")
    source = model_source(cfg)
    hf_config = load_hf_config(cfg, source)
    check_model_options(cfg, hf_config)
    check_sources(cfg, hf_config.vocab_size)
    ckpt_root = Path(cfg["checkpoint"]["dir"])
    resumed = None
    if cfg["checkpointing"]:
        check_writable(ckpt_root, cfg["config_file"])
        resumed = latest_trainer_state(ckpt_root)
    # The global batch and the schedule's length are fixed at the first start; a resume at
    # another world size changes only how the batch is split into micro-batches.
    data, optim = cfg["data"], cfg["optim"]
    first = cfg["train"]["global_batch_size"] or data["micro_batch"] * world * optim["grad_accum"]
    plan = {
        "global_batch_size": first,
        "schedule_steps": optim["decay_steps"] or cfg["train"]["max_steps"],
    }
    if resumed:  # a checkpoint written before these were saved keeps today's values
        plan = {key: resumed.get(key, value) for key, value in plan.items()}
    micro, accum = micro_batches(
        plan["global_batch_size"], data["micro_batch"], world, cfg["config_file"]
    )

    rank, world, device, mesh = setup_distributed(cfg)
    try:
        train(cfg, hf_config, source, plan, micro, accum, rank, world, device, mesh)
    finally:
        gc.collect()  # the model, optimizer and data are gone once train() has returned
    close_distributed(mesh)
    return 0


def train(cfg, hf_config, source, plan, micro, accum, rank, world, device, mesh) -> None:
    stop = {"signal": 0}

    def request_stop(signum, _frame) -> None:  # acted on between steps, by all ranks together
        stop["signal"] = signum

    for sig in STOP_SIGNALS:
        signal.signal(sig, request_stop)

    train_set, val_set = build_datasets(cfg, hf_config.vocab_size, rank)
    batches = training_batches(
        train_set, micro, cfg, rank, world, device, plan["global_batch_size"]
    )
    evaluating = cfg["eval"]["every"] > 0
    val_batches, tokenizer = [], None
    if evaluating:
        val_batches = validation_batches(val_set, micro, cfg["eval"]["batches"], rank, world)
    if cfg["eval"]["prompt"]:
        tokenizer = project_tokenizer(cfg, hf_config.vocab_size)

    model, info = build_model(cfg, hf_config, source, device, mesh)
    precision, fsdp_version = cfg["fsdp"]["precision"], cfg["fsdp"]["version"]
    optimizer, scheduler = build_optimizer(
        model, cfg, device, plan["schedule_steps"], info["matrices"]
    )
    scaler = ShardedGradScaler(device=device.type) if precision == "fp16" else None

    ckpt_root = Path(cfg["checkpoint"]["dir"])
    step, best_val = 0, math.inf
    trainer = load_checkpoint(ckpt_root, model, optimizer) if cfg["checkpointing"] else None
    if trainer is not None:
        step, best_val = trainer["step"], trainer.get("best_val_loss") or math.inf
        scheduler.load_state_dict(trainer["scheduler"])
        batches.load_state_dict(trainer["data"])
        if scaler is not None and trainer.get("scaler"):
            scaler.load_state_dict(trainer["scaler"])
        log0(f"resumed from {trainer['path']} (step {step}, world size {trainer['world_size']})")
    else:
        torch.manual_seed(cfg["train"]["seed"] + rank)  # per-rank streams (dropout)
    wanted = cfg["optim"]["decay_steps"] or cfg["train"]["max_steps"]
    if trainer is not None and wanted != plan["schedule_steps"]:
        log0(f"the schedule keeps its first start's length, {plan['schedule_steps']} steps")

    def save() -> Path:
        extra = {
            "scheduler": scheduler.state_dict(),
            "data": batches.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "seed": cfg["train"]["seed"],
            "best_val_loss": best_val if math.isfinite(best_val) else None,
            **plan,
        }
        path = save_checkpoint(ckpt_root, step, model, optimizer, extra, cfg["checkpoint"]["keep"])
        log0(f"saved checkpoint {path}")
        return path

    max_steps, log_every = cfg["train"]["max_steps"], cfg["train"]["log_every"]
    every, eval_every = cfg["checkpoint"]["every"], cfg["eval"]["every"]
    tokens_per_step = plan["global_batch_size"] * cfg["data"]["seq_len"]
    flops_token, peak = info["flops_per_token"], device_peak_flops(cfg, device)
    sinks = Sinks(cfg, enabled=rank == 0)
    progress = Progress(max_steps, step, enabled=rank == 0 and not cfg["log_json"])
    windows = Windows(cfg, device, rank, step)
    switches = [
        ("HSDP", cfg["fsdp"]["replicate"] > 1),
        ("CPU offload", cfg["fsdp"]["cpu_offload"]),
        ("activation checkpointing", cfg["fsdp"]["activation_checkpointing"] is True),
        (
            f"{cfg['fsdp']['activation_checkpointing']} activation checkpointing",
            isinstance(cfg["fsdp"]["activation_checkpointing"], str),
        ),
        ("compile", cfg["fsdp"]["compile"]),
    ]
    log0(
        f"FSDP{fsdp_version} {precision}{''.join(f' + {n}' for n, on in switches if on)} "
        f"on {world} x {device.type}: {info['parameters']:,} parameters, "
        f"{flops_token:.3g} FLOP/token, global batch {plan['global_batch_size']} "
        f"= {world} ranks x {accum} x {micro}"
    )

    def report(done: dict) -> None:
        """Log one finished step (its numbers were read one step after it ran)."""
        nonlocal window_start, window_steps
        window_steps += 1
        if done["step"] % log_every and done["step"] != max_steps and not done["stop"]:
            return
        elapsed = max(done["time"] - window_start, 1e-9)
        tokens_per_s = window_steps * tokens_per_step / elapsed
        mfu = tokens_per_s * flops_token / (peak * world) if peak else None
        record = {
            "step": done["step"],
            "loss": done["loss"],
            "lr": done["lr"],
            "grad_norm": done["grad_norm"],
            "tokens_per_s": tokens_per_s,
            "mfu": mfu,
            "peak_memory_bytes": peak_memory_bytes(device),
            "epoch": done["epoch"],
        }
        sinks.write(record)
        progress.update(
            done["step"],
            f"step {done['step']}/{max_steps} | loss {done['loss']:.4f} | lr {done['lr']:.2e} | "
            f"{tokens_per_s:,.0f} tok/s"
            + (f" | MFU {mfu:.1%}" if mfu is not None else "")
            + f" | peak {record['peak_memory_bytes'] / 2**30:.2f} GiB",
        )
        window_steps, window_start = 0, done["time"]

    model.train()
    saved_at, window_steps, window_start = step, 0, time.perf_counter()
    in_flight = None  # the last step's reduced numbers, on their way to the host
    while step < max_steps:
        windows.before_step(step + 1)
        loss_sum = torch.zeros((), device=device)
        for micro_step in range(accum):
            input_ids = batches.next().to(device, non_blocking=True)
            last = micro_step == accum - 1
            # Reduce-scatter gradients only on the last micro-batch of the step.
            if fsdp_version == 2:
                model.set_requires_gradient_sync(last)
                loss = model(input_ids=input_ids, labels=input_ids).loss / accum
            else:
                with nullcontext() if last else model.no_sync():
                    loss = model(input_ids=input_ids, labels=input_ids).loss / accum
            (scaler.scale(loss) if scaler is not None else loss).backward()
            loss_sum += loss.detach().float()

        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        grad_norm = clip_gradients(model, cfg["optim"]["grad_clip"], fsdp_version)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        lr = scheduler.get_last_lr()[0]
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        windows.after_step(step)

        # One small all-reduce per step: the loss, the gradient norm, and whether any rank was
        # told to stop. It is read one step later, so that on a GPU the CPU never waits for the
        # step it has just queued; every rank acts on the same step's flag.
        flag = torch.tensor(float(stop["signal"] != 0), device=device)
        shared = torch.stack([loss_sum, grad_norm.float().to(device), flag])
        dist.all_reduce(shared)
        previous = in_flight
        in_flight = {
            "values": shared.to("cpu", non_blocking=True),
            "ready": torch.cuda.Event() if device.type == "cuda" else None,
            "step": step,
            "lr": lr,
            "epoch": batches.epoch,
            "time": time.perf_counter(),  # when the host had queued the step
        }
        if in_flight["ready"] is not None:
            in_flight["ready"].record()
        stopping = False
        if previous is not None:
            done = read_step(previous, world)
            report(done)
            stopping = done["stop"]

        if evaluating and step % eval_every == 0:
            val_loss = evaluate(model, val_batches, device)
            record = {"step": step, "val_loss": val_loss}
            if val_loss < best_val:
                best_val = val_loss
                if cfg["checkpointing"] and cfg["checkpoint"]["best"]:
                    save_best(ckpt_root, step, model, val_loss)
                    record["best"] = True
            sinks.write(record)
            log0(
                f"step {step} | validation loss {val_loss:.4f}"
                + (" (best)" if "best" in record else "")
            )
            if tokenizer is not None:
                text = sample(
                    model,
                    tokenizer,
                    cfg["eval"]["prompt"],
                    cfg["eval"]["max_new_tokens"],
                    cfg["data"]["seq_len"],
                    device,
                )
                log0(f"sample: {cfg['eval']['prompt']}{text}")
        if cfg["checkpointing"] and every and step % every == 0:
            save()
            saved_at = step
        if stopping:
            log0(f"stop requested by a signal at step {step}: saving and exiting")
            break

    if in_flight is not None:
        report(read_step(in_flight, world))
    if cfg["checkpointing"] and saved_at != step:  # the last state is never lost
        save()
    if stop["signal"] == signal.SIGUSR1 and rank == 0 and "SLURM_JOB_ID" in os.environ:
        requeue_slurm_job()
    batches.close()
    progress.close()
    sinks.close()


def read_step(pending: dict, world: int) -> dict:
    """The numbers of a step whose all-reduce was queued earlier, now on the host."""
    if pending["ready"] is not None:
        pending["ready"].synchronize()  # waits for that step only, not for the one queued after
    loss_total, norm_total, stop_votes = pending["values"].tolist()
    return {
        "step": pending["step"],
        "loss": loss_total / world,
        "grad_norm": norm_total / world,  # the same on every rank: the sum over-counts it
        "stop": stop_votes > 0,
        "lr": pending["lr"],
        "epoch": pending["epoch"],
        "time": pending["time"],
    }


if __name__ == "__main__":
    run(main, "train.py")
