import torch.distributed as dist


def setup():
    """Initialise the default group (the caller picks the device)."""
    dist.init_process_group("nccl")


def cleanup():
    dist.destroy_process_group()
