"""The data-parallel strategies the planner compares, and how each maps to FSDP1 and ZeRO."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    """One way to run data parallelism: DDP, or FSDP2 with a resharding/offload/AC choice."""

    base: str  # "ddp" | "full-shard" | "no-reshard" | "hsdp"
    offload: bool = False
    checkpointing: bool = False

    @property
    def name(self) -> str:
        stem = "ddp" if self.base == "ddp" else f"fsdp2-{self.base}"
        return stem + ("+offload" if self.offload else "") + ("+ac" if self.checkpointing else "")

    @property
    def reshard_after_forward(self) -> bool | None:
        """The ``fully_shard`` argument for the decoder layers (None for DDP)."""
        return None if self.base == "ddp" else self.base != "no-reshard"

    @property
    def fsdp1(self) -> str:
        """The FSDP1 / DeepSpeed equivalent, for the notes."""
        return {
            "ddp": "DistributedDataParallel (ZeRO-0)",
            "full-shard": "FSDP1 ShardingStrategy.FULL_SHARD (ZeRO-3)",
            "no-reshard": "FSDP1 ShardingStrategy.SHARD_GRAD_OP (ZeRO-2-like)",
            "hsdp": "FSDP1 ShardingStrategy.HYBRID_SHARD",
        }[self.base] + (", CPUOffload(offload_params=True)" if self.offload else "")


BASES = ("ddp", "no-reshard", "hsdp", "full-shard")


def candidates(nodes: int, checkpointing_only: bool = False) -> list[Strategy]:
    """Every strategy worth comparing for this many nodes.

    HSDP is listed only across several nodes (on one node it is the same as full shard);
    DDP has no CPU offload.
    """
    found = []
    for base in BASES:
        if base == "hsdp" and nodes < 2:
            continue
        for offload in (False, True):
            if offload and base == "ddp":
                continue
            for ac in (False, True):
                if checkpointing_only and not ac:
                    continue
                found.append(Strategy(base, offload, ac))
    return found
