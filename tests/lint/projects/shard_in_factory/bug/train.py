import torch
import torch.distributed as dist

from builders import build_model
from parallel import prepare


def main():
    dist.init_process_group("gloo")
    model = build_model(8)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    prepare(model)
    model(torch.randn(2, 8)).sum().backward()
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
