import torch.distributed as dist
from torch.utils.data import DistributedSampler


def loader_kwargs(dataset, batch_size, train):
    sampler = DistributedSampler(
        dataset, rank=dist.get_rank(), num_replicas=dist.get_world_size(), shuffle=train
    )
    return {"sampler": sampler, "batch_size": batch_size}
