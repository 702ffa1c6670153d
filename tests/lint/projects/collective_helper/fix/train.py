import torch
import torch.distributed as dist

from utils.debugging import report_grad_norm


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 1)
    model(torch.randn(2, 4)).sum().backward()
    if dist.get_rank() == 0:
        report_grad_norm(model)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
