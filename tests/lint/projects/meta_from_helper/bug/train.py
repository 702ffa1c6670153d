import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from builders import build_model


def main():
    dist.init_process_group("gloo")
    model = build_model(16)
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 16)).sum().backward()
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
