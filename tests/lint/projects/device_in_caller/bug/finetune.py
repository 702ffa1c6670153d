import os

import torch

from dist_utils import cleanup, setup


def main():
    setup()
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(4, 4).to(f"cuda:{local_rank}")
    model(torch.randn(2, 4, device=f"cuda:{local_rank}"))
    cleanup()


if __name__ == "__main__":
    main()
