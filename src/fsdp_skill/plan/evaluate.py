"""One strategy's figures as the plan reports them, and which strategy to pick.

A strategy qualifies when it fits with a margin: at least ``MARGIN`` of the usable memory
(what ``--headroom`` leaves) stays free, because activations are estimates and allocators
fragment. Among those the fastest by estimated step time wins; one within ``TIE`` of it that
needs less memory wins instead, since the step-time model is not that precise.
"""

from __future__ import annotations

from typing import Any

from fsdp_skill.plan import comm, memory, snippet, step
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy, candidates
from fsdp_skill.plan.units import format_bytes

MARGIN = 0.05
TIE = 0.02


def margin_limit(setup: Setup) -> float:
    """The most a qualifying strategy may use per GPU."""
    return setup.usable_gpu_memory * (1 - MARGIN)


def strategy_row(setup: Setup, strategy: Strategy, torch_version: str | None) -> dict[str, Any]:
    """Memory, communication and step time of one strategy (the JSON row of the plan)."""
    mem = memory.estimate(setup, strategy)
    traffic = comm.estimate(setup, strategy)
    timing = step.estimate(setup, strategy, snippet.fused_cpu_step(strategy, torch_version))
    fits_gpu = mem.total <= setup.usable_gpu_memory
    fits_cpu = setup.cpu_memory is None or mem.cpu_per_node <= setup.cpu_memory
    notes = [f"FSDP1/DeepSpeed equivalent: {strategy.fsdp1}"]
    notes.append(_states_note(setup, strategy, mem))
    if not fits_cpu:
        notes.append(f"needs {format_bytes(mem.cpu_per_node)} of CPU memory per node")
    return {
        "name": strategy.name,
        "fits": fits_gpu and fits_cpu,
        "fits_with_margin": mem.total <= margin_limit(setup) and fits_cpu,
        "per_gpu_bytes": mem.per_gpu(),
        "free_bytes": int(setup.usable_gpu_memory - mem.total),
        "cpu_bytes": mem.cpu_per_node,
        "cpu_bytes_per_rank": mem.cpu_per_rank,
        "cpu_memory_checked": bool(strategy.offload and setup.cpu_memory is not None),
        "peak_phase": max(mem.phases, key=mem.phases.get),
        "comm_bytes_per_step": traffic.total,
        "comm_seconds_per_step": round(traffic.seconds, 4),
        "comm": traffic.as_dict(),
        "step_seconds": round(timing.seconds, 4),
        "tokens_per_second": round(timing.tokens_per_second, 1),
        "step": timing.as_dict(),
        "shard_size": memory.shard_world(setup, strategy),
        "replicate_size": setup.gpus // memory.shard_world(setup, strategy),
        "reshard_after_forward": strategy.reshard_after_forward,
        "cpu_offload": strategy.offload,
        "activation_checkpointing": strategy.checkpointing,
        "notes": notes,
    }


def _states_note(setup: Setup, strategy: Strategy, mem: memory.Memory) -> str:
    world = memory.shard_world(setup, strategy)
    states = mem.params + mem.grads + mem.optimizer + mem.cpu_per_rank
    where = " (on the CPU)" if strategy.offload else ""
    if setup.lora_rank:
        return (
            f"model states {format_bytes(states)} per rank{where}: the frozen base in "
            f"{setup.precision}, {setup.trainable_params:,} LoRA parameters training in fp32"
        )
    per_param = 4 + 4 + setup.optimizer_bytes
    even = setup.spec.params / world
    padded = memory.model_shard_numel(setup.spec, world)
    if setup.spec.exact and padded > even * 1.01:
        return (
            f"model states {format_bytes(states)} on the fullest rank{where}, "
            f"{padded / even:.2f}x the even {per_param} bytes x {setup.spec.params:,} params / "
            f"{world}: FSDP2 shards each tensor on dim 0, and a tensor with fewer rows than "
            "ranks (e.g. stacked experts) leaves some ranks a full row and others none; "
            "fully_shard's shard_placement_fn can shard such tensors on dim 1 instead"
        )
    return (
        f"model states {format_bytes(states)} per rank{where} = {per_param} bytes x "
        f"{setup.spec.params:,} params / {world}"
    )


def rows_for(
    setup: Setup, torch_version: str | None, checkpointing_only: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Strategy]]:
    """Every candidate strategy's row, and the strategies by name."""
    strategies = {s.name: s for s in candidates(setup.nodes, checkpointing_only)}
    return [strategy_row(setup, s, torch_version) for s in strategies.values()], strategies


def pick(rows: list[dict[str, Any]], offload: bool = True) -> dict[str, Any] | None:
    """The row to recommend, or None when nothing fits with the margin."""
    qualified = [r for r in rows if r["fits_with_margin"] and (offload or not r["cpu_offload"])]
    if not qualified:
        return None
    fastest = min(r["step_seconds"] for r in qualified)
    near = [r for r in qualified if r["step_seconds"] <= fastest * (1 + TIE)]
    return min(near, key=lambda r: (r["per_gpu_bytes"]["total"], r["step_seconds"]))
