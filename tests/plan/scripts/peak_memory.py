"""Run under torchrun: the real peak memory of a training step per strategy (CPU, measured
from profiler allocation events) next to the planner's per-GPU total.

Output: one JSON line per strategy, from rank 0, prefixed with ``RESULT``.
"""

import json

import torch
import torch.distributed as dist

from fsdp_skill.plan.measure import peak_bytes, planned_bytes

CONFIG = dict(
    hidden_size=128,
    intermediate_size=344,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1003,
)
STRATEGIES = ("fsdp2-full-shard", "fsdp2-no-reshard", "fsdp2-full-shard+ac", "ddp")
SEQ, BATCH = 256, 2


def main() -> None:
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    for strategy in STRATEGIES:
        measured = peak_bytes(CONFIG, strategy, SEQ, BATCH, torch.device("cpu"))
        planned = planned_bytes(CONFIG, strategy, SEQ, BATCH, world)
        if dist.get_rank() == 0:
            row = {"strategy": strategy, "world": world, "measured": measured, "planned": planned}
            print("RESULT " + json.dumps(row), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
