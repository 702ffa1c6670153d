import torch.distributed as dist

from builders import build_model_and_optimizer
from parallel import apply_fsdp


def main():
    dist.init_process_group("gloo")
    model, optimizer = build_model_and_optimizer({"width": 8, "lr": 1e-3})
    apply_fsdp(model)
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
