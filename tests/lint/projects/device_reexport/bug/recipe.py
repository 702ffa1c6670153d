import sys

import torch
from torch.distributed import destroy_process_group, init_process_group

from pkg import utils


class Recipe:
    def __init__(self, device_type):
        self.device = utils.get_device(device_type)
        self.model = torch.nn.Linear(4, 4).to(self.device)

    def train(self):
        self.model(torch.randn(2, 4, device=self.device)).sum().backward()


def main():
    init_process_group("cuda:nccl,cpu:gloo")
    recipe = Recipe("cuda")
    recipe.train()
    destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
