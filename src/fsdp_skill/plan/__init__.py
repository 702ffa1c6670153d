"""Memory and communication planner for DDP, FSDP2 and HSDP training.

``plan(...)`` returns, for every strategy, the bytes per GPU (parameters, gradients,
optimizer states, activations, FSDP buffers), CPU bytes when offloading, communication per
step, and recommends the cheapest strategy that fits, with the code that applies it.
Importing this package (and planning from a count or a config file) never imports torch.
"""

from fsdp_skill.plan.planner import plan

__all__ = ["plan"]
