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
# moment); foreach SGD updates in place, and so does a fused 8-bit AdamW kernel.
STEP_TEMP_BYTES = {"adamw": 4, "adam": 4, "sgd": 0, "sgd-nomomentum": 0, "adamw8bit": 0}


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

    ``total`` is the peak over the phases of a step, not the sum of the parts: backward
    starts with every activation alive and little of FSDP's buffers; later the activations
    are freed while gradients and reduce buffers appear; the optimizer step runs with no
    activations but its own temporaries. ``activations`` and ``buffers`` are each their own
    largest value.
    """

    params: int
    grads: int
    optimizer: int
    acts: activations.Activations
    buffers_at_start: int  # FSDP/DDP buffers when backward starts
    buffers: int  # the largest they get (during the layers' backward)
    optimizer_step: int  # temporaries of the optimizer step
    grads_persist: bool  # gradients live through backward (DDP's buckets)
    cpu_per_rank: int
    cpu_per_node: int

    @property
    def activations(self) -> int:
        return self.acts.peak

    @property
    def phases(self) -> dict[str, int]:
        """Bytes alive at each candidate peak."""
        resident = self.params + self.optimizer + (self.grads if self.grads_persist else 0)
        return {
            "loss_backward": resident + self.acts.at_loss_backward + self.buffers_at_start,
            "layer_backward": resident + self.acts.in_layer_backward + self.buffers,
            "optimizer_step": (
                self.params + self.grads + self.optimizer + self.optimizer_step + self.acts.logits
            ),
        }

    @property
    def total(self) -> int:
        return max(self.phases.values())

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


def model_states(setup: Setup, world: int) -> tuple[int, int, int, int]:
    """Bytes of one rank's shard: parameters, gradients, optimizer states, step temporaries.

    Training the whole model keeps everything in fp32. With LoRA the frozen base is stored in
    the compute dtype and only the adapters (fp32) have gradients and optimizer states.
    """
    shard = model_shard_numel(setup.spec, world)
    opt, temp = setup.optimizer_bytes, STEP_TEMP_BYTES[setup.optimizer]
    if not setup.lora_rank:
        return MASTER_BYTES * shard, MASTER_BYTES * shard, opt * shard, temp * shard
    adapters = math.ceil(setup.trainable_params / world)
    params = setup.compute_bytes * shard + MASTER_BYTES * adapters
    return params, MASTER_BYTES * adapters, opt * adapters, temp * adapters


def trained_unit_params(setup: Setup) -> tuple[int, int]:
    """Parameters with gradients in one decoder layer and in the root unit."""
    spec = setup.spec
    if setup.lora_rank:
        return spec.lora_layer_params(setup.lora_rank), 0
    return spec.layer_params, spec.root_params


def estimate(setup: Setup, strategy: Strategy) -> Memory:
    """The memory one GPU (and its node's CPU) needs at the peak of a training step."""
    spec, c, r = setup.spec, setup.compute_bytes, setup.reduce_bytes
    ddp = strategy.base == "ddp"
    acts = activations.estimate(
        spec,
        setup.micro_batch,
        setup.seq_len,
        c,
        setup.attention,
        strategy.checkpointing,
        autocast=ddp and c != MASTER_BYTES,
    )
    world = shard_world(setup, strategy)
    params, grads, optimizer, step = model_states(setup, world)
    n, unit, root = spec.params, spec.layer_params, spec.root_params
    unit_grad, root_grad = trained_unit_params(setup)
    if ddp:
        # Under autocast, the low-precision weight copies stay alive until backward uses them
        # (a LoRA base is already stored in the compute dtype: no copies).
        # (gradient_as_bucket_view=True makes the gradients views into DDP's buckets.)
        copies = (c * n) if c != MASTER_BYTES and not setup.lora_rank else 0
        return Memory(params, grads, optimizer, acts, copies, copies, step, True, 0, 0)
    # The root unit (embeddings, norm, head) is not resharded after forward; backward starts
    # with it and the prefetched last layer gathered.
    if strategy.base == "no-reshard":
        # Every layer stays unsharded from its forward until its backward.
        gathered = c * unit * spec.num_layers
        at_start = c * root + gathered
    else:
        gathered = 2 * c * unit  # the unit in use and the prefetched next one
        at_start = c * root + c * unit
    # In the layers' backward: the root's unsharded gradient (reduced at the very end), the
    # gathered units, and the unit being reduced (its unsharded gradients plus the
    # reduce-scatter input buffer).
    buffers = c * root + c * root_grad + gathered + (c + r) * unit_grad
    cpu = 0
    if strategy.offload:
        # Sharded params, grads and optimizer states live in (pinned) CPU memory; each
        # all-gather first copies the unit's fp32 shard to the GPU.
        cpu = params + grads + optimizer
        copy_in = 2 * MASTER_BYTES * math.ceil(unit / world)
        buffers += copy_in
        at_start += copy_in
        params = grads = optimizer = step = 0  # the optimizer steps on the CPU
    return Memory(
        params,
        grads,
        optimizer,
        acts,
        at_start,
        buffers,
        step,
        False,
        cpu,
        cpu * setup.gpus_per_node,
    )
