"""Bytes autograd keeps for backward, per decoder layer and for the output head.

The coefficients were measured on the Hugging Face implementations by summing the storages
that ``torch.autograd.graph.saved_tensors_hooks`` sees (tests/plan/test_activations.py keeps
them honest). ``c`` is the compute dtype's size in bytes; ``t`` is tokens per micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.plan.model import ModelSpec

ATTENTION = ("sdpa", "eager")


@dataclass(frozen=True)
class Activations:
    """Activation bytes for one micro-batch on one GPU."""

    per_layer: int  # saved by one decoder layer without checkpointing
    per_layer_checkpointed: int  # saved by one checkpointed layer (its input)
    head: int  # embedding output, final norm, logits and loss kept for backward
    total: int  # at the peak, for the whole model

    def as_dict(self) -> dict[str, int]:
        return {
            "per_layer": self.per_layer,
            "per_layer_checkpointed": self.per_layer_checkpointed,
            "head": self.head,
            "total": self.total,
        }


def layer_bytes(spec: ModelSpec, batch: int, seq: int, c: int, attention: str) -> int:
    """Bytes one decoder layer saves for backward (no checkpointing)."""
    t = batch * seq
    h, f, a = spec.hidden, spec.intermediate, spec.heads
    # Softmax is taken in fp32 and cast back to the compute dtype; in fp32 the cast is a no-op.
    scores = (4 + (c if c != 4 else 0)) * batch * a * seq * seq
    if spec.family == "gpt_neox" or spec.family == "gpt2":
        mlp = (5 * c if spec.family == "gpt2" else 2 * c) * f  # GPT-2's tanh GELU saves more
        dropout = 2 * h if spec.family == "gpt2" else 0  # bool masks after attention and MLP
        per_token = 8 * c * h + mlp + dropout + 4 * a + 8
        if spec.family == "gpt2":
            # GPT-2 trains with attention dropout, which sends SDPA down its math path: the
            # full score matrix is kept either way.
            return t * per_token + scores
        if attention == "eager":
            # no log-sum-exp and one hidden-sized tensor fewer, but the scores
            return t * (per_token - c * h - 4 * a) + scores
        return t * per_token
    # Llama layout: two RMSNorms (fp32 input + normalised copy), q/k/v/out, SwiGLU MLP.
    if spec.experts:
        k = spec.experts_per_token
        mlp = k * 4 * c * f + 2 * k * c * h + 4 * spec.experts
    else:
        mlp = 4 * c * f
    attn_h = spec.attn_dim
    if attention == "eager":
        # keys and values are repeated to every head before the matmuls
        per_token = (8 + 2 * c) * h + 6 * c * attn_h + mlp + 8
        return t * per_token + scores
    per_token = (8 + 2 * c) * h + 4 * c * attn_h + 2 * c * spec.kv_dim + mlp + 4 * a + 8
    return t * per_token


def head_saved_bytes(spec: ModelSpec, batch: int, seq: int, c: int) -> int:
    """What the final norm, output head and loss save for backward (fp32 log-softmax)."""
    return batch * seq * ((4 + 2 * c) * spec.hidden + 4 * spec.vocab)


def head_bytes(spec: ModelSpec, batch: int, seq: int, c: int) -> int:
    """The saved head tensors, plus the logits the caller holds (compute dtype) and the fp32
    gradient of the log-softmax that backward creates first."""
    return head_saved_bytes(spec, batch, seq, c) + batch * seq * (c + 4) * spec.vocab


def estimate(
    spec: ModelSpec, batch: int, seq: int, c: int, attention: str, checkpointing: bool
) -> Activations:
    """Activation bytes at the peak (start of backward) for one micro-batch.

    With checkpointing each layer keeps only its input, and backward recomputes one layer at a
    time, so one full layer's activations come back on top.
    """
    per_layer = layer_bytes(spec, batch, seq, c, attention)
    per_ckpt = batch * seq * spec.hidden * c
    head = head_bytes(spec, batch, seq, c)
    if checkpointing:
        total = spec.num_layers * per_ckpt + per_layer + head
    else:
        total = spec.num_layers * per_layer + head
    return Activations(per_layer, per_ckpt, head, total)
