import torch


def build_model(width):
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, 1))
    return model
