import torch

from dist_utils import cleanup, setup


def main():
    setup()
    try:
        print(torch.nn.Linear(2, 2)(torch.randn(1, 2)))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
