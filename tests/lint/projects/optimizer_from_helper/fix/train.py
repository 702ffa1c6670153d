import torch.distributed as dist

from builders import build_model, build_optimizer
from parallel import apply_fsdp


def main():
    dist.init_process_group("gloo")
    cfg = {"width": 8, "lr": 1e-3}
    model = build_model(cfg)
    apply_fsdp(model)
    optimizer = build_optimizer(model, cfg)
    optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
