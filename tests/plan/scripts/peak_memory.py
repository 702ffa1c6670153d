"""The real peak memory of a training step per strategy (CPU, measured from profiler
allocation events) next to the planner's per-GPU total, for rank 0 of a world of
``argv[1]`` ranks played by one process on the ``fake`` backend (see plan/measure.py for why
not gloo). Rank 0 holds the most of every unevenly split tensor: the fullest rank, which the
planner reports.

Output: one JSON line per strategy and repeat (``argv[2]``, default 1), prefixed with
``RESULT``.
"""

import json
import sys

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
    world = int(sys.argv[1])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    # one thread: CPU kernels size some scratch buffers by the thread count
    torch.set_num_threads(1)
    dist.init_process_group("fake", rank=0, world_size=world)
    for repeat in range(repeats):
        for strategy in STRATEGIES:
            measured = peak_bytes(CONFIG, strategy, SEQ, BATCH, torch.device("cpu"))
            planned = planned_bytes(CONFIG, strategy, SEQ, BATCH, world)
            row = {"strategy": strategy, "world": world, "repeat": repeat}
            row.update(measured=measured, planned=planned)
            print("RESULT " + json.dumps(row), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
