"""What else would fit without CPU offload (or run faster than a pick with a thin margin),
each found by planning again with one thing changed: more GPUs, a smaller micro-batch or
sequence, an 8-bit optimizer, LoRA, activation checkpointing.

A change is worth listing when its best strategy (without offload, keeping the margin)
beats the current pick: any fit at all when nothing fits without offload, more tokens per
second otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fsdp_skill.plan import evaluate
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.units import format_bytes, format_seconds

LORA_RANK = 16
NODE_GPUS = 8  # GPUs per node assumed when nodes are added to a plan of one node
MAX_NODES = 256
SEQ_STEP = 128


@dataclass(frozen=True)
class Goal:
    """What an alternative must beat, and how to plan it."""

    chosen: dict[str, Any] | None  # the current pick (None: nothing fits)
    torch_version: str | None
    checkpointing_only: bool

    @property
    def needs_any_fit(self) -> bool:
        """Nothing fits without offload now, so any fit without it is worth listing."""
        return self.chosen is None or self.chosen["cpu_offload"]

    def beaten_by(self, row: dict[str, Any]) -> bool:
        if self.needs_any_fit:
            return True
        return row["tokens_per_second"] > self.chosen["tokens_per_second"] * (1 + evaluate.TIE)


def _rows(setup: Setup, goal: Goal) -> list[dict[str, Any]]:
    return evaluate.rows_for(setup, goal.torch_version, goal.checkpointing_only)[0]


def _best(setup: Setup, goal: Goal) -> dict[str, Any] | None:
    """The pick without offload after a change, if it beats the current pick."""
    row = evaluate.pick(_rows(setup, goal), offload=False)
    return row if row and goal.beaten_by(row) else None


def _entry(change: str, row: dict | None, setup: Setup, goal: Goal) -> dict | None:
    """The ``{change, effect}`` object (None when the change does not beat the pick)."""
    if row is None:
        if not goal.needs_any_fit:
            return None
        small = min(
            (r for r in _rows(setup, goal) if not r["cpu_offload"]),
            key=lambda r: r["per_gpu_bytes"]["total"],
        )
        effect = (
            f"still no strategy fits without offload: the smallest, {small['name']}, needs "
            f"{format_bytes(small['per_gpu_bytes']['total'])} (at most "
            f"{format_bytes(evaluate.margin_limit(setup))} with the margin)"
        )
        return {"change": change, "effect": effect, "strategy": None}
    effect = (
        f"{row['name']} fits at {format_bytes(row['per_gpu_bytes']['total'])} of "
        f"{format_bytes(setup.usable_gpu_memory)} usable, est. "
        f"{format_seconds(row['step_seconds'])}/step, {row['tokens_per_second']:,.0f} tokens/s"
    )
    return {
        "change": change,
        "effect": effect,
        "strategy": row["name"],
        "per_gpu_total": row["per_gpu_bytes"]["total"],
        "step_seconds": row["step_seconds"],
        "tokens_per_second": row["tokens_per_second"],
    }


def _layouts(setup: Setup) -> Iterator[tuple[int, int]]:
    """Larger (GPUs, nodes) to try, smallest first: fill the node to 8, then add nodes."""
    per_node = setup.gpus_per_node
    if setup.nodes == 1:
        for gpus in range(setup.gpus + 1, max(NODE_GPUS, setup.gpus) + 1):
            yield gpus, 1
        per_node = max(NODE_GPUS, setup.gpus)
    for nodes in range(max(2, setup.nodes + 1), MAX_NODES + 1):
        yield nodes * per_node, nodes


def more_gpus(setup: Setup, goal: Goal) -> dict | None:
    """The fewest GPUs on which a strategy fits without offload (when nothing does now)."""
    if not goal.needs_any_fit:
        return None
    bigger = None
    for gpus, nodes in _layouts(setup):
        bigger = dataclasses.replace(setup, gpus=gpus, nodes=nodes)
        row = _best(bigger, goal)
        if row:
            layout = f"{gpus} GPUs" + (f" ({nodes} nodes x {gpus // nodes})" if nodes > 1 else "")
            return _entry(f"use {layout} instead of {setup.gpus}", row, bigger, goal)
    if bigger is None:  # already at the largest layout considered
        return None
    # sharding divides the model states, never the activations
    acts = min(r["per_gpu_bytes"]["activations"] for r in _rows(bigger, goal))
    return {
        "change": "more GPUs",
        "effect": (
            f"none up to {bigger.gpus} GPUs fits without offload: activations alone take "
            f"{format_bytes(acts)} per GPU; shorten the sequence or shard it (context "
            "parallelism)"
        ),
        "strategy": None,
    }


def _fitting(setup: Setup, goal: Goal) -> dict[str, Any] | None:
    """The best strategy that fits without what the pick needs to fit: offload when nothing
    fits without it, else activation checkpointing (None when the pick needs neither)."""
    rows = [r for r in _rows(setup, goal) if not r["cpu_offload"]]
    if not goal.needs_any_fit:
        if not goal.chosen["activation_checkpointing"]:
            return None
        rows = [r for r in rows if not r["activation_checkpointing"]]
    return evaluate.pick(rows, offload=False)


def _largest(setup: Setup, field: str, step: int, goal: Goal):
    """The largest value of ``field`` below the current one (a multiple of ``step``) at which
    ``_fitting`` finds a strategy, with that strategy's row and the setup; None if none."""
    found = None
    lo, hi = 1, (getattr(setup, field) - 1) // step
    while lo <= hi:  # memory only grows with the field, so bisect
        mid = (lo + hi) // 2
        trial = dataclasses.replace(setup, **{field: mid * step})
        row = _fitting(trial, goal)
        if row:
            found, lo = (mid * step, row, trial), mid + 1
        else:
            hi = mid - 1
    return found


def smaller_batch(setup: Setup, goal: Goal) -> dict | None:
    """The largest micro-batch (or, at micro-batch 1, sequence length) at which a strategy
    fits without offload (or without checkpointing, when the pick has it)."""
    if not goal.needs_any_fit and not goal.chosen["activation_checkpointing"]:
        return None
    for field, step, what in (
        ("micro_batch", 1, "micro-batch"),
        ("seq_len", SEQ_STEP, "sequence length"),
    ):
        if getattr(setup, field) <= step:
            continue
        found = _largest(setup, field, step, goal)
        if found:
            value, row, trial = found
            if not goal.beaten_by(row):
                return None
            return _entry(f"{what} {value} instead of {getattr(setup, field)}", row, trial, goal)
        if field == "micro_batch":
            break  # a smaller sequence at a larger micro-batch is not the obvious next step
    if not goal.needs_any_fit:
        return None
    states = min(
        sum(r["per_gpu_bytes"][k] for k in ("params", "grads", "optimizer"))
        for r in _rows(setup, goal)
        if not r["cpu_offload"]
    )
    return {
        "change": "a smaller micro-batch or a shorter sequence",
        "effect": (
            f"none fits without offload: the model states alone take {format_bytes(states)} "
            f"per GPU on {setup.gpus} GPUs, however few the tokens"
        ),
        "strategy": None,
    }


def eight_bit_optimizer(setup: Setup, goal: Goal) -> dict | None:
    """AdamW with 1-byte moments instead of fp32 ones."""
    if setup.optimizer not in ("adamw", "adam"):
        return None
    trial = dataclasses.replace(setup, optimizer="adamw8bit")
    change = (
        "an 8-bit AdamW (e.g. torchao.optim.AdamW8bit or bitsandbytes' AdamW8bit: 2 bytes of "
        "state per parameter instead of 8; check that it accepts your sharded DTensor "
        "parameters)"
    )
    return _entry(change, _best(trial, goal), trial, goal)


def lora(setup: Setup, goal: Goal) -> dict | None:
    """Fine-tune LoRA adapters of rank 16 instead of every weight."""
    if setup.lora_rank:
        return None
    trial = dataclasses.replace(setup, lora_rank=LORA_RANK)
    share = trial.trainable_params / (setup.spec.params + trial.trainable_params)
    change = (
        f"LoRA of rank {LORA_RANK} on every weight matrix of the decoder layers instead of "
        f"full fine-tuning ({trial.trainable_params:,} trainable parameters, {share:.2%}; the "
        f"base frozen in {setup.precision})"
    )
    return _entry(change, _best(trial, goal), trial, goal)


def checkpointing(setup: Setup, goal: Goal) -> dict | None:
    """Activation checkpointing on the chosen strategy, when it does not use it yet."""
    chosen = goal.chosen
    if chosen is None or chosen["activation_checkpointing"]:
        return None
    rows, _ = evaluate.rows_for(setup, goal.torch_version, checkpointing_only=True)
    row = next(r for r in rows if r["name"] == chosen["name"] + "+ac")
    freed = chosen["per_gpu_bytes"]["total"] - row["per_gpu_bytes"]["total"]
    slower = row["step_seconds"] - chosen["step_seconds"]
    return {
        "change": f"activation checkpointing ({row['name']})",
        "effect": (
            f"frees {format_bytes(freed)} per GPU (total "
            f"{format_bytes(row['per_gpu_bytes']['total'])}) for {format_seconds(slower)} more "
            "per step: the layers' forward runs twice"
        ),
        "strategy": row["name"],
        "per_gpu_total": row["per_gpu_bytes"]["total"],
        "step_seconds": row["step_seconds"],
        "tokens_per_second": row["tokens_per_second"],
    }


def suggest(
    setup: Setup, chosen: dict | None, torch_version: str | None, checkpointing_only: bool
) -> list[dict[str, Any]]:
    """Each change that would help, with what it does (planned again, not guessed)."""
    goal = Goal(chosen, torch_version, checkpointing_only)
    found = [
        more_gpus(setup, goal),
        smaller_batch(setup, goal),
        eight_bit_optimizer(setup, goal),
        lora(setup, goal),
        checkpointing(setup, goal),
    ]
    return [f for f in found if f]
