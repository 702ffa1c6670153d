from torch.distributed.fsdp import fully_shard


def prepare(model):
    """Shards the model in place: after the caller built its optimizer."""
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    model.train()
