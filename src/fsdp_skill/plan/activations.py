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
    """Activation bytes for one micro-batch on one GPU, by where they live in a step."""

    layers: int  # what all decoder layers keep for backward (only inputs when checkpointed)
    recompute: int  # one layer's activations rebuilt in backward (checkpointing only)
    head: int  # what the final norm, head and loss keep
    logits: int  # the logits the training loop holds through backward and the step
    loss_backward: int  # the two fp32 gradients alive in the log-softmax backward

    @property
    def at_loss_backward(self) -> int:
        """Everything alive when backward starts: the activation peak without checkpointing."""
        return self.layers + self.head + self.logits + self.loss_backward

    @property
    def in_layer_backward(self) -> int:
        """Alive while a decoder layer's backward runs (the head has been released)."""
        return self.layers + self.recompute + self.logits

    @property
    def peak(self) -> int:
        return max(self.at_loss_backward, self.in_layer_backward)


def layer_bytes(spec: ModelSpec, batch: int, seq: int, c: int, attention: str) -> int:
    """Bytes one decoder layer saves for backward (no checkpointing)."""
    t = batch * seq
    h, f, a = spec.hidden, spec.intermediate, spec.heads
    # Softmax is taken in fp32 and cast back to the compute dtype; in fp32 the cast is a no-op.
    scores = (4 + (c if c != 4 else 0)) * batch * a * seq * seq
    if spec.family == "gpt2":
        return _gpt2_layer(spec, t, batch, seq, c, attention)
    if spec.family == "gpt_neox":
        per_token = 8 * c * h + 2 * c * f + 4 * a + 8
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
        per_token = (8 + 4 * c) * h + 4 * c * attn_h + mlp + 8
        return t * (per_token + _qk_norm(spec, c)) + scores
    per_token = (8 + 4 * c) * h + 2 * c * attn_h + 2 * c * spec.kv_dim + mlp + 4 * a + 8
    return t * (per_token + _qk_norm(spec, c))


def _gpt2_layer(spec: ModelSpec, t: int, batch: int, seq: int, c: int, attention: str) -> int:
    """GPT-2 trains with dropout: masks are kept, and attention dropout sends SDPA down its
    math path, which keeps the full score matrix in more copies than eager does in bf16."""
    if c == 4:
        extra, const, quad = 8, 16, 12
    elif attention == "eager":
        extra, const, quad = 4, 8, 6
    else:
        extra, const, quad = 10, 8, 12
    per_token = (8 * c + extra) * spec.hidden + 5 * c * spec.intermediate + const
    return t * per_token + quad * batch * spec.heads * seq * seq


def _qk_norm(spec: ModelSpec, c: int) -> int:
    """Per token: Qwen3's RMSNorm on every query and key head (fp32 input, normalised copy)."""
    if spec.family != "qwen3":
        return 0
    return (4 + c) * (spec.attn_dim + spec.kv_dim) + 4 * (spec.heads + spec.kv_heads)


def head_saved_bytes(spec: ModelSpec, batch: int, seq: int, c: int) -> int:
    """What the final norm, output head and loss save for backward (fp32 log-softmax)."""
    return batch * seq * ((4 + 2 * c) * spec.hidden + 4 * spec.vocab)


def autocast_extra_bytes(spec: ModelSpec, batch: int, seq: int) -> int:
    """Extra bytes per layer under autocast with fp32 weights (DDP): the residual stream and
    the norms stay fp32, and each linear saves a low-precision copy of its input."""
    return batch * seq * 10 * spec.hidden


def estimate(
    spec: ModelSpec,
    batch: int,
    seq: int,
    c: int,
    attention: str,
    checkpointing: bool,
    autocast: bool = False,
) -> Activations:
    """Activation bytes of one micro-batch, split by phase of the step.

    With checkpointing each layer keeps only its input, and backward recomputes one layer at a
    time, so one full layer's activations come back on top. ``autocast`` is the DDP way of
    mixed precision (fp32 weights, low-precision matmuls), which keeps more in fp32.
    """
    t = batch * seq
    per_layer = layer_bytes(spec, batch, seq, c, attention)
    if autocast:
        per_layer += autocast_extra_bytes(spec, batch, seq)
    per_ckpt = t * spec.hidden * (4 if autocast else c)
    layers = spec.num_layers * (per_ckpt if checkpointing else per_layer)
    return Activations(
        layers=layers,
        recompute=per_layer if checkpointing else 0,
        head=head_saved_bytes(spec, batch, seq, c),
        logits=t * c * spec.vocab,
        loss_backward=t * 8 * spec.vocab,
    )
