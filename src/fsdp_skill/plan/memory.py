"""Per-GPU and CPU bytes of one training step, for each strategy.

Model states follow what FSDP2 keeps: parameters are sharded on dim 0 with ``torch.chunk``
semantics, so the fullest rank holds ``ceil(dim0 / world) * rest`` elements of each tensor
(that padding is why a rank can hold slightly more than 1/world of the model). Sharded
parameters and gradients stay in fp32 under ``MixedPrecisionPolicy``; the compute copies
(bf16/fp16) exist only while a unit is all-gathered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fsdp_skill.plan import activations
from fsdp_skill.plan.model import ModelSpec
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy

MASTER_BYTES = 4  # sharded parameters, their gradients and optimizer states are fp32
# The foreach Adam/AdamW step allocates one fp32 temporary per parameter (sqrt of the second
# moment); foreach SGD updates in place.
STEP_TEMP_BYTES = {"adamw": 4, "adam": 4, "sgd": 0, "sgd-nomomentum": 0}


def shard_numel(shapes: tuple[tuple[int, ...], ...], world: int) -> int:
    """Elements the fullest rank holds when each tensor is chunked on dim 0 over ``world``."""
    return sum(math.ceil(s[0] / world) * math.prod(s[1:]) for s in shapes)


def model_shard_numel(spec: ModelSpec, world: int) -> int:
    """Elements of the whole model on the fullest rank (exact when the shapes are known)."""
    if not spec.exact:
        return math.ceil(spec.params / world)
    return shard_numel(spec.root_tensors, world) + spec.num_layers * shard_numel(
        spec.layer_tensors, world
    )


@dataclass(frozen=True)
class Memory:
    """Bytes for one strategy: per GPU split by kind, and per node on the CPU.

    ``total`` is the peak, which is not always the sum of the parts: with FSDP,
    ``optimizer.zero_grad()`` frees the sharded gradients, and backward creates them layer by
    layer while it frees that layer's activations, so the two peak at opposite ends of
    backward. The optimizer step has its own peak (its temporaries, no activations).
    """

    params: int
    grads: int
    optimizer: int
    activations: int
    buffers: int
    optimizer_step: int  # temporaries of the optimizer step
    grads_persist: bool  # gradients live through backward (DDP's buckets)
    cpu_per_rank: int
    cpu_per_node: int

    @property
    def backward_peak(self) -> int:
        if self.grads_persist:
            moving = self.grads + self.activations
        else:
            moving = max(self.grads, self.activations)
        return self.params + self.optimizer + self.buffers + moving

    @property
    def step_peak(self) -> int:
        return self.params + self.grads + self.optimizer + self.optimizer_step

    @property
    def total(self) -> int:
        return max(self.backward_peak, self.step_peak)

    def per_gpu(self) -> dict[str, int]:
        return {
            "params": self.params,
            "grads": self.grads,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "buffers": self.buffers,
            "optimizer_step": self.optimizer_step,
            "total": self.total,
        }


def shard_world(setup: Setup, strategy: Strategy) -> int:
    """How many GPUs share one copy of the model states."""
    if strategy.base == "ddp":
        return 1
    if strategy.base == "hsdp":
        return setup.gpus_per_node
    return setup.gpus


def estimate(setup: Setup, strategy: Strategy) -> Memory:
    """The memory one GPU (and its node's CPU) needs at the peak of a training step."""
    spec, c, r = setup.spec, setup.compute_bytes, setup.reduce_bytes
    acts = activations.estimate(
        spec,
        setup.micro_batch,
        setup.seq_len,
        c,
        setup.attention,
        strategy.checkpointing,
    ).total
    world = shard_world(setup, strategy)
    shard = model_shard_numel(spec, world)
    params = MASTER_BYTES * shard
    grads = MASTER_BYTES * shard
    optimizer = setup.optimizer_bytes * shard
    n, unit, root = spec.params, spec.layer_params, spec.root_params
    if strategy.base == "ddp":
        # Under autocast, the low-precision weight copies stay alive until backward uses them.
        # (gradient_as_bucket_view=True makes the gradients views into DDP's buckets.)
        buffers = (c * n) if c != MASTER_BYTES else 0
        step = STEP_TEMP_BYTES[setup.optimizer] * shard
        return Memory(params, grads, optimizer, acts, buffers, step, True, 0, 0)
    # The root unit (embeddings, norm, head) is not resharded after forward, and its
    # unsharded gradient lives through backward until its reduce-scatter at the end.
    root_bytes = 2 * c * root
    # The unit being reduced: its unsharded gradients plus the reduce-scatter input buffer.
    reduce_bytes = (c + r) * unit
    if strategy.base == "no-reshard":
        # Every layer stays unsharded from its forward until its backward.
        gathered = c * unit * spec.num_layers
    else:
        gathered = 2 * c * unit  # the unit in use and the prefetched next one
    buffers = root_bytes + gathered + reduce_bytes
    cpu = 0
    step = STEP_TEMP_BYTES[setup.optimizer] * shard
    if strategy.offload:
        # Sharded params, grads and optimizer states live in (pinned) CPU memory; each
        # all-gather first copies the unit's fp32 shard to the GPU.
        cpu = params + grads + optimizer
        buffers += 2 * MASTER_BYTES * math.ceil(unit / world)
        params = grads = optimizer = step = 0  # the optimizer steps on the CPU
    return Memory(
        params, grads, optimizer, acts, buffers, step, False, cpu, cpu * setup.gpus_per_node
    )
