"""The validated inputs of one plan: the model, the machines, and the training settings."""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.errors import UsageError
from fsdp_skill.plan.model import ModelSpec

# Bytes per element of the compute copy (what forward/backward run in) for each precision.
COMPUTE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
REDUCE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# Optimizer state bytes per parameter, kept in fp32 like the sharded master parameters.
# "adamw8bit" (planned as an alternative, e.g. torchao.optim.AdamW8bit or bitsandbytes'
# AdamW8bit) keeps both moments in one byte each; its per-block scales add under 2%.
OPTIMIZER_BYTES = {"adamw": 8, "adam": 8, "sgd": 4, "sgd-nomomentum": 0, "adamw8bit": 2}

# Bus bandwidths (bytes/s per GPU, NCCL "busbw" sense) used when none is given. Deliberately
# conservative round figures; measure yours with nccl-tests and pass --bandwidth.
INTERCONNECTS = {"nvlink": 150e9, "pcie": 12e9}
NETWORKS = {"infiniband": 25e9, "ethernet": 5e9}
# Host <-> GPU copies with CPU offload (pinned memory over PCIe, one direction at a time).
HOST_LINK_BANDWIDTH = 20e9


@dataclass(frozen=True)
class Setup:
    """Everything a plan depends on, already checked."""

    spec: ModelSpec
    gpus: int
    nodes: int
    gpu_memory: int
    seq_len: int
    micro_batch: int
    precision: str
    optimizer: str
    attention: str
    headroom: float
    reduce_dtype: str
    intra_bandwidth: float
    inter_bandwidth: float
    bandwidth_assumed: bool
    cpu_memory: int | None = None
    # where cpu_memory came from: "given" (--cpu-memory), "local" (this machine's
    # /proc/meminfo, for a plan of this machine) or None (not known: host memory not checked)
    cpu_memory_source: str | None = None
    # the step-time model's assumptions (see step.py): achieved fraction of the GPU's peak
    # FLOP/s, that peak, and CPU AdamW parameters per second per rank (None: step.py's
    # measured default for the optimizer the snippet builds)
    mfu: float = 0.4
    peak_flops: float | None = None
    cpu_adam_rate: float | None = None
    # LoRA adapters of this rank on every linear layer of the decoder layers (0: train the
    # whole model); the base model then stays frozen in the compute dtype, with no gradients
    # and no optimizer state, and only the adapters train
    lora_rank: int = 0

    @property
    def gpus_per_node(self) -> int:
        return self.gpus // self.nodes

    @property
    def compute_bytes(self) -> int:
        return COMPUTE_BYTES[self.precision]

    @property
    def reduce_bytes(self) -> int:
        return REDUCE_BYTES[self.reduce_dtype]

    @property
    def optimizer_bytes(self) -> int:
        return OPTIMIZER_BYTES[self.optimizer]

    @property
    def usable_gpu_memory(self) -> float:
        return self.gpu_memory * (1 - self.headroom)

    @property
    def trainable_params(self) -> int:
        """Parameters with gradients and optimizer state: all, or only the LoRA adapters."""
        if not self.lora_rank:
            return self.spec.params
        return self.spec.num_layers * self.spec.lora_layer_params(self.lora_rank)


def check_choice(value: str, allowed: dict | tuple, what: str) -> str:
    """``value`` lower-cased if it is one of ``allowed``; UsageError otherwise."""
    value = str(value).lower()
    if value not in allowed:
        raise UsageError(f"unknown {what} {value!r}: choose one of {', '.join(allowed)}")
    return value


def check_layout(gpus: int, nodes: int) -> None:
    """GPUs and nodes must be positive and the GPUs spread evenly over the nodes."""
    for value, what in ((gpus, "--gpus"), (nodes, "--nodes")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{what} must be a whole number of at least 1, got {value!r}")
    if nodes > gpus:
        raise UsageError(f"more nodes ({nodes}) than GPUs ({gpus}): --gpus counts every GPU")
    if gpus % nodes:
        raise UsageError(f"{gpus} GPUs do not spread evenly over {nodes} nodes")
