"""Bytes each rank sends per training step, and the time that takes.

Counted as ring collectives do: an all-gather or reduce-scatter of M bytes over n ranks sends
(n-1)/n x M from every rank, an all-reduce twice that. Dividing by a bus bandwidth (the
"busbw" nccl-tests reports) gives the time of the collective.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.plan.memory import MASTER_BYTES, model_shard_numel, shard_numel, shard_world
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy


@dataclass(frozen=True)
class Comm:
    """Per-rank traffic of one step, by collective, and its estimated time."""

    all_gather: float
    reduce_scatter: float
    all_reduce: float
    host_transfer: float  # CPU<->GPU copies with offloading
    seconds: float

    @property
    def total(self) -> int:
        return int(self.all_gather + self.reduce_scatter + self.all_reduce)

    def as_dict(self) -> dict[str, float]:
        return {
            "all_gather": int(self.all_gather),
            "reduce_scatter": int(self.reduce_scatter),
            "all_reduce": int(self.all_reduce),
            "host_transfer": int(self.host_transfer),
            "total": self.total,
            "seconds": round(self.seconds, 4),
        }


def _ring(world: int) -> float:
    return (world - 1) / world if world > 1 else 0.0


def estimate(setup: Setup, strategy: Strategy, pcie_bandwidth: float = 20e9) -> Comm:
    """Traffic and time of one step (forward + backward + gradient reduction) for one rank."""
    spec, c, r = setup.spec, setup.compute_bytes, setup.reduce_bytes
    n = spec.params
    multi_node = setup.nodes > 1
    if strategy.base == "ddp":
        world = setup.gpus
        all_reduce = 2 * _ring(world) * MASTER_BYTES * n  # gradients are fp32 under autocast
        bw = setup.inter_bandwidth if multi_node else setup.intra_bandwidth
        return Comm(0, 0, all_reduce, 0, all_reduce / bw)
    world = shard_world(setup, strategy)
    gathers = 1 if strategy.base == "no-reshard" else 2
    # Collectives move the padded shards: world x the fullest rank's elements.
    total = world * model_shard_numel(spec, world)
    root = world * shard_numel(spec.root_tensors, world) if spec.exact else spec.root_params
    # The root unit keeps its parameters through backward, so it is gathered once only.
    gathered = c * (total + (gathers - 1) * (total - root))
    all_gather = _ring(world) * gathered
    reduce_scatter = _ring(world) * r * total
    all_reduce = 0.0
    spans_nodes = multi_node and strategy.base != "hsdp"
    bw = setup.inter_bandwidth if spans_nodes else setup.intra_bandwidth
    seconds = (all_gather + reduce_scatter) / bw
    if strategy.base == "hsdp" and setup.nodes > 1:
        # Each shard's gradient is all-reduced across the replicas (one GPU per node).
        all_reduce = 2 * _ring(setup.nodes) * r * model_shard_numel(spec, world)
        seconds += all_reduce / setup.inter_bandwidth
    host = 0.0
    if strategy.offload:
        shard = model_shard_numel(spec, world)
        host = MASTER_BYTES * shard * gathers + r * shard  # params up per gather, grads down
        seconds += host / pcie_bandwidth
    return Comm(all_gather, reduce_scatter, all_reduce, host, seconds)
