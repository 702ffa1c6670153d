import torch

CHECKPOINT = "base_model.pt"


def build_model(width):
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, 1))
    # the weights come from a checkpoint: assign=True gives the meta parameters real storage
    model.load_state_dict(torch.load(CHECKPOINT, mmap=True), assign=True)
    return model
