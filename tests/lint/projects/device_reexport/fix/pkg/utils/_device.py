import os

import torch


def get_device(device_type="cuda"):
    device = torch.device(device_type, int(os.environ.get("LOCAL_RANK", 0)))
    backend = getattr(torch, device_type)
    backend.set_device(device)
    return device
