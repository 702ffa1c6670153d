import torch

from dist_utils import setup


def main():
    setup()
    print(torch.nn.Linear(2, 2)(torch.randn(1, 2)))


if __name__ == "__main__":
    main()
