import os

import torch

from dist_utils import cleanup, setup


def main():
    setup()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = torch.nn.Linear(4, 4).cuda()
    model(torch.randn(2, 4).cuda())
    cleanup()


if __name__ == "__main__":
    main()
