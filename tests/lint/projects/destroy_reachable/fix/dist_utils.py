import torch.distributed as dist


def setup():
    dist.init_process_group("gloo")


def cleanup():
    dist.destroy_process_group()
