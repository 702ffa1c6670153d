import os

import torch


def get_device(device_type="cuda"):
    return torch.device(device_type, int(os.environ.get("LOCAL_RANK", 0)))
