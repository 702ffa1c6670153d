"""Bytes each rank sends per training step, and the time that takes.

Counted as ring collectives do: an all-gather or reduce-scatter of M bytes over n ranks sends
(n-1)/n x M from every rank, an all-reduce twice that. Dividing by a bus bandwidth (the
"busbw" nccl-tests reports) gives the time of the collective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fsdp_skill.plan.memory import (
    MASTER_BYTES,
    model_shard_numel,
    shard_numel,
    shard_world,
    trained_unit_params,
)
from fsdp_skill.plan.setup import HOST_LINK_BANDWIDTH, Setup
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


@dataclass(frozen=True)
class UnitSeconds:
    """Seconds the transfers of one FSDP unit take, for the overlap in step.py.

    ``gather`` is one all-gather of a decoder layer (with offload, its host-to-GPU copy
    first); ``reduce`` its gradient reduction (reduce-scatter, HSDP's all-reduce across the
    nodes, with offload the copy back to the host); ``root_*`` the same for the root unit.
    For DDP ``reduce`` is the all-reduce of every gradient and the rest is 0.
    """

    gather: float
    reduce: float
    root_gather: float
    root_reduce: float


def _ring(world: int) -> float:
    return (world - 1) / world if world > 1 else 0.0


def _link(setup: Setup, strategy: Strategy) -> float:
    """Bandwidth of the link a strategy's all-gathers and reduce-scatters cross."""
    spans_nodes = setup.nodes > 1 and strategy.base != "hsdp"
    return setup.inter_bandwidth if spans_nodes else setup.intra_bandwidth


def _trained_numel(setup: Setup, world: int) -> int:
    """Elements of the gradients the fullest rank reduces (all, or the LoRA adapters)."""
    if setup.lora_rank:
        return math.ceil(setup.trainable_params / world)
    return model_shard_numel(setup.spec, world)


def _host_seconds(setup: Setup, stored: int, grads: int) -> float:
    """Copying ``stored`` parameter elements up and ``grads`` gradient elements down."""
    param_bytes = setup.compute_bytes if setup.lora_rank else MASTER_BYTES
    return (param_bytes * stored + setup.reduce_bytes * grads) / HOST_LINK_BANDWIDTH


def estimate(setup: Setup, strategy: Strategy) -> Comm:
    """Traffic and time of one step (forward + backward + gradient reduction) for one rank."""
    spec, c, r = setup.spec, setup.compute_bytes, setup.reduce_bytes
    if strategy.base == "ddp":
        world = setup.gpus
        # gradients are fp32 under autocast
        all_reduce = 2 * _ring(world) * MASTER_BYTES * setup.trainable_params
        bw = setup.inter_bandwidth if setup.nodes > 1 else setup.intra_bandwidth
        return Comm(0, 0, all_reduce, 0, all_reduce / bw)
    world = shard_world(setup, strategy)
    gathers = 1 if strategy.base == "no-reshard" else 2
    # Collectives move the padded shards: world x the fullest rank's elements.
    total = world * model_shard_numel(spec, world)
    root = world * shard_numel(spec.root_tensors, world) if spec.exact else spec.root_params
    # The root unit keeps its parameters through backward, so it is gathered once only.
    gathered = c * (total + (gathers - 1) * (total - root))
    all_gather = _ring(world) * gathered
    reduce_scatter = _ring(world) * r * world * _trained_numel(setup, world)
    all_reduce = 0.0
    seconds = (all_gather + reduce_scatter) / _link(setup, strategy)
    if strategy.base == "hsdp" and setup.nodes > 1:
        # Each shard's gradient is all-reduced across the replicas (one GPU per node).
        all_reduce = 2 * _ring(setup.nodes) * r * _trained_numel(setup, world)
        seconds += all_reduce / setup.inter_bandwidth
    host = 0.0
    if strategy.offload:
        shard = model_shard_numel(spec, world)
        seconds_host = _host_seconds(setup, shard * gathers, _trained_numel(setup, world))
        host = seconds_host * HOST_LINK_BANDWIDTH  # params up per gather, grads down
        seconds += seconds_host
    return Comm(all_gather, reduce_scatter, all_reduce, host, seconds)


def unit_seconds(setup: Setup, strategy: Strategy) -> UnitSeconds:
    """Per-unit transfer times of one step, for the overlap with compute."""
    spec, c, r = setup.spec, setup.compute_bytes, setup.reduce_bytes
    if strategy.base == "ddp":
        return UnitSeconds(0.0, estimate(setup, strategy).seconds, 0.0, 0.0)
    world = shard_world(setup, strategy)
    link = _link(setup, strategy)
    ring = _ring(world)
    layer = shard_numel(spec.layer_tensors, world) if spec.exact else spec.layer_params / world
    root = shard_numel(spec.root_tensors, world) if spec.exact else spec.root_params / world
    layer_grad, root_grad = (math.ceil(n / world) for n in trained_unit_params(setup))

    def gather(shard: float) -> float:
        up = _host_seconds(setup, shard, 0) if strategy.offload else 0.0
        return up + ring * c * world * shard / link

    def reduce(shard: float) -> float:
        seconds = ring * r * world * shard / link
        if strategy.base == "hsdp" and setup.nodes > 1:
            seconds += 2 * _ring(setup.nodes) * r * shard / setup.inter_bandwidth
        if strategy.offload:
            seconds += _host_seconds(setup, 0, shard)
        return seconds

    return UnitSeconds(gather(layer), reduce(layer_grad), gather(root), reduce(root_grad))
