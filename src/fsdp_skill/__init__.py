"""pytorch-fsdp: an expert Agent Skill for PyTorch FSDP training, and its toolkit."""

__version__ = "1.0.0"

SKILL_NAME = "pytorch-fsdp"
