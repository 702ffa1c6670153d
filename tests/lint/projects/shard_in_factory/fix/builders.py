import torch
from torch.distributed.fsdp import fully_shard


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def build_model(width):
    """The model comes back sharded, so any optimizer built from it sees the shards."""
    model = Net(width)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model
