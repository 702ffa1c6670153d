"""Measure the real peak memory of a training step, to check the planner against.

Builds a Llama-style ``transformers`` model, applies a strategy the way the planner's
snippet does, runs a warm-up step (which creates the optimizer states) and then measures
the peak bytes allocated during one more step: on CUDA with ``max_memory_allocated``, on CPU
from the allocation events of ``torch.profiler`` (``profile_memory=True``). Needs an
initialised process group; imports torch, so only the benchmarks and tests load it.

On CPU, initialise the ``fake`` backend (one process playing rank 0 of a world of any
size), not gloo: the profiler records allocations and frees only on the threads it
profiles, and gloo's worker threads sometimes drop the last reference to a collective's
buffers, so their frees go unrecorded and the running total (hence the peak) drifts up by
whole buffers, more often on a loaded machine. The fake backend communicates nothing, on the
calling thread, so every free is seen, and like NCCL it allocates no host-side copies.
Garbage left by the warm-up step is collected before the measured one for the same reason.
"""

from __future__ import annotations

import gc
from typing import Any

STRATEGIES = (
    "ddp",
    "ddp+ac",
    "fsdp2-full-shard",
    "fsdp2-no-reshard",
    "fsdp2-full-shard+ac",
    "fsdp2-full-shard+offload",
)


def build(config: dict[str, Any], strategy: str, device: Any) -> tuple[Any, Any]:
    """A Llama model (random weights) with ``strategy`` applied, and its AdamW optimizer."""
    import torch
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
    )
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from torch.nn.parallel import DistributedDataParallel
    from transformers import AutoConfig, LlamaForCausalLM

    # no KV cache in training (with it, checkpointing appends each layer's keys twice)
    cfg = AutoConfig.for_model("llama", use_cache=False, **config)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    offload = "+offload" in strategy
    with torch.device("cpu" if offload else device):
        model = LlamaForCausalLM(cfg)
    if "+ac" in strategy:
        layer_cls = type(model.model.layers[0])
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, layer_cls))
    if strategy.startswith("ddp"):
        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)
        if torch.distributed.get_backend() == "fake":
            # the fake group's all-reduce returns no tensor; this hook returns the bucket
            # untouched, as an in-place all-reduce leaves it
            from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

            model.register_comm_hook(None, noop_hook)
    else:
        world = torch.distributed.get_world_size()
        kwargs: dict[str, Any] = {
            "mesh": init_device_mesh(device.type, (world,)),
            "mp_policy": MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            ),
        }
        if offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        reshard = "no-reshard" not in strategy
        for layer in model.model.layers:
            fully_shard(layer, reshard_after_forward=reshard, **kwargs)
        fully_shard(model, **kwargs)
    # as the planner's snippet: foreach on GPUs (the default there), the fused CPU kernel
    # for offloaded shards
    impl = {"fused": True} if offload else {"foreach": True}
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, **impl)


def train_step(model: Any, optimizer: Any, ids: Any, strategy: str) -> None:
    """One step as a Hugging Face loop writes it: the outputs stay referenced until the end."""
    import torch

    if strategy.startswith("ddp"):  # DDP's mixed precision is autocast over fp32 weights
        with torch.autocast(ids.device.type, dtype=torch.bfloat16):
            outputs = model(input_ids=ids, labels=ids)
    else:
        outputs = model(input_ids=ids, labels=ids)
    outputs.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del outputs


def peak_bytes(config: dict[str, Any], strategy: str, seq: int, batch: int, device: Any) -> int:
    """Peak bytes allocated on ``device`` during a steady-state step (model states included)."""
    import torch

    if device.type == "cuda":
        return _peak_cuda(config, strategy, seq, batch, device)
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, optimizer = build(config, strategy, device)
        ids = torch.randint(0, config["vocab_size"], (batch, seq), device=device)
        train_step(model, optimizer, ids, strategy)
        gc.collect()
        with record_function("measured-step"):
            train_step(model, optimizer, ids, strategy)
    events = sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns())
    window = next(e for e in events if e.name() == "measured-step")
    allocated = peak = 0
    for event in events:
        if event.name() != "[memory]":
            continue
        allocated += event.nbytes()  # frees come as negative sizes
        if window.start_ns() <= event.start_ns() <= window.end_ns():
            peak = max(peak, allocated)
    del model, optimizer
    gc.collect()
    return peak


def _peak_cuda(config: dict[str, Any], strategy: str, seq: int, batch: int, device: Any) -> int:
    import torch

    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    model, optimizer = build(config, strategy, device)
    ids = torch.randint(0, config["vocab_size"], (batch, seq), device=device)
    train_step(model, optimizer, ids, strategy)
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    train_step(model, optimizer, ids, strategy)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    del model, optimizer, ids
    gc.collect()
    torch.cuda.empty_cache()
    return peak


def step_seconds(
    config: dict[str, Any], strategy: str, seq: int, batch: int, device: Any, steps: int = 5
) -> dict[str, float]:
    """Median seconds of forward + backward, of the optimizer step and of the whole step,
    over ``steps`` steady-state steps (after two warm-up steps)."""
    import statistics
    import time

    import torch

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    model, optimizer = build(config, strategy, device)
    ids = torch.randint(0, config["vocab_size"], (batch, seq), device=device)
    for _ in range(2):
        train_step(model, optimizer, ids, strategy)
    compute, update = [], []
    for _ in range(steps):
        sync()
        start = time.perf_counter()
        outputs = model(input_ids=ids, labels=ids)
        outputs.loss.backward()
        del outputs
        sync()
        middle = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        compute.append(middle - start)
        update.append(time.perf_counter() - middle)
    del model, optimizer, ids
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    totals = [c + u for c, u in zip(compute, update, strict=True)]
    return {
        "forward_backward": statistics.median(compute),
        "optimizer": statistics.median(update),
        "step": statistics.median(totals),
    }


def planned_row(
    config: dict[str, Any], strategy: str, seq: int, batch: int, world: int, **options: Any
) -> dict[str, Any]:
    """The planner's row for the same run (``options`` as ``plan`` takes them)."""
    from fsdp_skill.plan import plan

    result = plan(
        model_config={"model_type": "llama", **config},
        gpus=world,
        gpu_memory="100TB",
        seq_len=seq,
        micro_batch=batch,
        **options,
    )
    return next(s for s in result["strategies"] if s["name"] == strategy)


def planned_bytes(config: dict[str, Any], strategy: str, seq: int, batch: int, world: int) -> int:
    """The planner's per-GPU total for the same run."""
    return planned_row(config, strategy, seq, batch, world)["per_gpu_bytes"]["total"]
