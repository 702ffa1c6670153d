import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from data_utils import loader_kwargs
from loop import train


def main():
    dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(64, 4))
    loader = DataLoader(dataset, **loader_kwargs(dataset, 8, train=True))
    model = torch.nn.Linear(4, 1)
    train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), epochs=3)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
