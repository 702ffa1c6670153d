"""Memory and communication planner for DDP, FSDP2 and HSDP training.

``plan(...)`` returns, for every strategy, the bytes per GPU (parameters, gradients,
optimizer states, activations, FSDP buffers), CPU bytes when offloading, communication and
the estimated step time per step, and recommends the fastest strategy that fits with a
margin, with the code that applies it and what else would fit. Importing this package (and
planning from a count or a config file) never imports torch.
"""

from fsdp_skill.plan.planner import plan

__all__ = ["plan"]
