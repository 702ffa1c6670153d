from torch.distributed.fsdp import fully_shard


def apply_fsdp(model):
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
