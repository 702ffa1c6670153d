import torch


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def build_model(cfg):
    return Net(cfg["width"])


def build_optimizer(model, cfg):
    return torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
