"""A small FSDP2 training script with the mistakes people make most when they move from DDP.

Not meant to run well: it is what the README's `fsdp-skill lint` example checks. Each mistake
is marked; `fsdp-skill lint examples/train_buggy.py` finds every one of them.
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def build_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def main() -> None:
    dist.init_process_group("nccl")  # mistake: no torch.cuda.set_device(local rank) first
    model = build_model().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # mistake: before sharding
    for layer in model:
        fully_shard(layer)
    fully_shard(model)

    data = TensorDataset(torch.randn(1024, 32), torch.randn(1024, 1))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    for _epoch in range(3):  # mistake: sampler.set_epoch(epoch) is never called
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")  # mistake: a sharded state dict
        dist.barrier()  # mistake: the other ranks never reach this barrier
    print(f"done on {os.environ.get('HOSTNAME', 'this host')}")
    # mistake: dist.destroy_process_group() is never called


if __name__ == "__main__":
    main()
