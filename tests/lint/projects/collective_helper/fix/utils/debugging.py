import torch


def report_grad_norm(model):
    total = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]).sum()
    print(f"local grad norm {total.item():.3f}")
