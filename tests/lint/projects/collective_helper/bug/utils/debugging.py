import torch
import torch.distributed as dist


def report_grad_norm(model):
    total = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]).sum()
    dist.all_reduce(total)
    print(f"grad norm {total.item():.3f}")
