"""How long one training step takes with each strategy: compute, exposed communication and
the optimizer step, each a term of its own.

- **compute**: training FLOPs (6 x the parameters each token is multiplied with, plus the
  attention scores: PaLM's 6N + 12 x layers x attention width x sequence per token, the
  definition ``fsdp-skill new``'s train.py logs MFU with) at ``mfu`` x the GPU's peak.
  Activation checkpointing runs the decoder layers' forward again, all but the last matmul
  (torch's checkpoint stops once backward has what it needs): about x 1.3. With LoRA the
  frozen weights need no weight gradients (4N instead of 6N).
- **exposed communication**: FSDP2 prefetches the next unit's all-gather while the current
  one computes and reduces each unit's gradients while the next computes, so per unit only
  what the link needs beyond that unit's compute time shows, plus what nothing can hide (the
  first all-gather, the last reductions). DDP's all-reduce hides behind backward except the
  embedding's, whose gradient is ready last. With offload the host<->GPU copies ride with
  the collectives.
- **optimizer**: on the GPU, memory traffic of torch's foreach implementation (the default
  on CUDA) at the GPU's memory bandwidth; with CPU offload, the rank's shard at a CPU AdamW
  rate measured by ``benchmarks/cpu_adam.py``. Nothing overlaps the step.

One step is one micro-batch per GPU (no gradient accumulation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fsdp_skill.plan import comm
from fsdp_skill.plan.memory import model_shard_numel, shard_world
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy

DEFAULT_MFU = 0.40
# Dense peak FLOP/s of an H100 SXM, from NVIDIA's H100 data sheet: 989 TFLOP/s on bf16/fp16
# tensor cores; fp32 matmuls run without TF32 by default in torch
# (torch.get_float32_matmul_precision() is "highest"), at the 67 TFLOP/s of plain fp32.
PEAK_FLOPS = {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12}
GPU_NAME = "H100 SXM"
GPU_MEMORY_BANDWIDTH = 3.35e12  # H100 SXM HBM3, same data sheet
# Bytes of memory traffic per parameter of one step of torch's foreach implementations
# (torch/optim/adam.py, sgd.py in 2.13: each elementwise pass reads and writes whole fp32
# tensors; AdamW makes nine, 92 bytes). The 8-bit AdamW is one fused pass over fp32
# parameters and gradients and 1-byte moments.
STEP_BYTES = {"adamw": 92, "adam": 84, "sgd": 32, "sgd-nomomentum": 12, "adamw8bit": 18}
# CPU AdamW parameters per second per rank: what benchmarks/cpu_adam.py measures on one core
# of the 2-core AMD EPYC machine this project is developed on (64M fp32 parameters, far
# larger than the cache; thread CPU time, torch 2.13): the fused kernel, which the offload
# snippet uses from torch 2.4 (when CPU fused kernels arrived, pytorch/pytorch#123074), and
# the per-tensor loop torch runs on CPU tensors otherwise (no foreach kernels on CPU; its
# temporaries make it slower still on larger tensors). One core, because torchrun starts
# every rank with OMP_NUM_THREADS=1 when a node runs several (torch/distributed/run.py).
# Pass --cpu-adam-rate with what the benchmark measures on your nodes.
CPU_ADAMW_RATE = {"fused": 2.2e9, "loop": 4.0e8}


@dataclass(frozen=True)
class StepTime:
    """The terms of one step's time on one GPU (seconds), and what they assume."""

    flops: float  # per GPU, recomputation included
    compute: float
    recompute: float  # the part of compute that activation checkpointing adds
    comm: float  # time the links are busy: collectives and host copies
    comm_exposed: float  # the part of it compute does not hide
    optimizer: float
    optimizer_on: str  # "gpu" or "cpu"
    optimizer_rate: float  # parameters per second the optimizer term assumes
    tokens: int  # per GPU per step
    gpus: int
    mfu: float
    peak_flops: float

    @property
    def seconds(self) -> float:
        return self.compute + self.comm_exposed + self.optimizer

    @property
    def tokens_per_second(self) -> float:
        """All GPUs together."""
        return self.tokens * self.gpus / self.seconds

    def as_dict(self) -> dict[str, float | str]:
        return {
            "compute_seconds": round(self.compute, 4),
            "recompute_seconds": round(self.recompute, 4),
            "comm_seconds": round(self.comm, 4),
            "comm_exposed_seconds": round(self.comm_exposed, 4),
            "optimizer_seconds": round(self.optimizer, 4),
            "optimizer_on": self.optimizer_on,
            "optimizer_params_per_second": self.optimizer_rate,
            "step_seconds": round(self.seconds, 4),
            "tokens_per_second": round(self.tokens_per_second, 1),
            "flops_per_gpu": self.flops,
            "mfu": self.mfu,
            "peak_flops": self.peak_flops,
        }


@dataclass(frozen=True)
class Flops:
    """Training FLOPs of one micro-batch on one GPU, by where they run."""

    layer_forward: float  # one decoder layer
    layer_recompute: float  # what checkpointing runs again of it
    layer_backward: float  # one decoder layer (weight and input gradients, attention)
    root_forward: float  # output head (the embedding is a lookup)
    root_backward: float
    adapters: float  # LoRA adapters, forward and backward, all layers
    layers: int
    checkpointing: bool

    @property
    def recompute(self) -> float:
        return self.layers * self.layer_recompute if self.checkpointing else 0.0

    @property
    def total(self) -> float:
        per_layer = self.layer_forward + self.layer_backward
        return (
            self.layers * per_layer
            + self.root_forward
            + self.root_backward
            + self.adapters
            + self.recompute
        )


def train_flops(setup: Setup, checkpointing: bool) -> Flops:
    """FLOPs of forward, backward and recomputation for one micro-batch on one GPU."""
    spec = setup.spec
    tokens = setup.micro_batch * setup.seq_len
    layer_matmul = 2 * tokens * spec.layer_matrix_params
    # what is left of the multiplied parameters: the output head
    head = spec.matmul_params - spec.num_layers * spec.layer_matrix_params
    root_matmul = 2 * tokens * max(0, head)
    attention = 4 * tokens * setup.seq_len * spec.attn_dim  # QK^T and AV, causal mask ignored
    adapters = 0.0
    if setup.lora_rank:
        # frozen weights: gradients for the inputs only (the first layer's input needs none
        # either, which is left out: under 1/layers of the backward); the adapters train
        layer_backward = layer_matmul + 2 * attention
        root_backward = root_matmul
        adapters = 6 * tokens * setup.trainable_params
    else:
        layer_backward = 2 * (layer_matmul + attention)
        root_backward = 2 * root_matmul
    # torch's non-reentrant checkpoint stops recomputing once backward has every tensor it
    # saved: the layer's last matmul (the MLP's down projection) is not run again, unless an
    # op after it saves something: an MoE scales it by the routing weights, GPT-2's residual
    # dropout keeps a mask
    reruns_last = spec.experts or spec.family == "gpt2"
    last = 0 if reruns_last else 2 * tokens * spec.hidden * spec.intermediate
    return Flops(
        layer_forward=layer_matmul + attention,
        layer_recompute=layer_matmul + attention - last,
        layer_backward=layer_backward,
        root_forward=root_matmul,
        root_backward=root_backward,
        adapters=adapters,
        layers=spec.num_layers,
        checkpointing=checkpointing,
    )


def peak_flops(setup: Setup) -> float:
    """The GPU's peak FLOP/s the compute term divides by (given, or an H100's)."""
    return setup.peak_flops or PEAK_FLOPS[setup.precision]


def cpu_adam_rate(setup: Setup, fused: bool) -> float:
    """CPU parameters per second per rank for the optimizer step with offload."""
    if setup.cpu_adam_rate:
        return setup.cpu_adam_rate
    base = CPU_ADAMW_RATE["fused" if fused else "loop"]
    # other optimizers: in proportion to their memory traffic (the CPU step is memory-bound)
    return base * STEP_BYTES["adamw"] / STEP_BYTES[setup.optimizer]


def _exposed_comm(setup: Setup, strategy: Strategy, flops: Flops, rate: float) -> float:
    """Seconds of communication compute does not hide, for one step."""
    units = comm.unit_seconds(setup, strategy)
    layers = flops.layers
    recomputed = flops.layer_recompute if flops.checkpointing else 0.0
    backward_layer = (flops.layer_backward + recomputed) / rate
    if strategy.base == "ddp":
        spec = setup.spec
        # the embedding's gradient is complete only at the very end of backward
        last = units.reduce * min(1.0, spec.vocab * spec.hidden / setup.trainable_params)
        if setup.lora_rank:
            last = 0.0  # the embedding is frozen
        hidden_by = layers * backward_layer + flops.root_backward / rate
        return max(0.0, units.reduce - last - hidden_by) + last
    forward_layer = flops.layer_forward / rate
    regather = 0.0 if strategy.base == "no-reshard" else units.gather
    forward = (
        units.root_gather + units.gather + (layers - 1) * max(0.0, units.gather - forward_layer)
    )
    backward = (
        max(0.0, regather - flops.root_backward / rate)
        + (layers - 1) * max(0.0, regather + units.reduce - backward_layer)
        + units.reduce
        + units.root_reduce
    )
    return forward + backward


def _busy_comm(setup: Setup, strategy: Strategy, layers: int) -> float:
    """Seconds the links carry data in one step (collectives and host copies)."""
    units = comm.unit_seconds(setup, strategy)
    if strategy.base == "ddp":
        return units.reduce
    gathers = 1 if strategy.base == "no-reshard" else 2
    return units.root_gather + layers * (gathers * units.gather + units.reduce) + units.root_reduce


def estimate(setup: Setup, strategy: Strategy, fused_cpu_step: bool = True) -> StepTime:
    """The step time of ``strategy`` and its terms.

    ``fused_cpu_step`` says whether the offloaded optimizer runs torch's fused CPU kernel
    (what the snippet writes for torch >= 2.4) or the per-tensor loop.
    """
    flops = train_flops(setup, strategy.checkpointing)
    peak = peak_flops(setup)
    rate = peak * setup.mfu
    world = shard_world(setup, strategy)
    trained = (
        math.ceil(setup.trainable_params / world)
        if setup.lora_rank
        else model_shard_numel(setup.spec, world)
    )
    if strategy.offload:
        opt_rate = cpu_adam_rate(setup, fused_cpu_step)
        where = "cpu"
    else:
        opt_rate = GPU_MEMORY_BANDWIDTH / STEP_BYTES[setup.optimizer]
        where = "gpu"
    return StepTime(
        flops=flops.total,
        compute=flops.total / rate,
        recompute=flops.recompute / rate,
        comm=_busy_comm(setup, strategy, flops.layers),
        comm_exposed=_exposed_comm(setup, strategy, flops, rate),
        optimizer=trained / opt_rate,
        optimizer_on=where,
        optimizer_rate=opt_rate,
        tokens=setup.micro_batch * setup.seq_len,
        gpus=setup.gpus,
        mfu=setup.mfu,
        peak_flops=peak,
    )
