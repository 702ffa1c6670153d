"""A decoder-only transformer described by its shapes, read from a Hugging Face config.

Only the shapes the planner needs: every parameter tensor of the root module (embeddings,
final norm, output head) and of one decoder layer, and the numbers activations depend on.
Nothing here imports torch or transformers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_skill.errors import UsageError

# Families whose decoder layer is attention + SwiGLU MLP with RMSNorm (the Llama layout).
LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "mixtral")
GPT_LIKE = ("gpt2", "gpt_neox")
FAMILIES = LLAMA_LIKE + GPT_LIKE

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of a decoder-only language model.

    ``root_tensors`` are the parameters FSDP leaves to the root module (embeddings, final norm,
    untied output head); ``layer_tensors`` are those of one decoder layer, repeated
    ``num_layers`` times. ``exact`` is False when the shapes were made up from a bare count.
    """

    name: str
    family: str
    hidden: int
    num_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    root_tensors: tuple[Shape, ...]
    layer_tensors: tuple[Shape, ...]
    experts: int = 0
    experts_per_token: int = 0
    exact: bool = True
    declared_params: int | None = None
    max_positions: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def layer_params(self) -> int:
        """Parameters in one decoder layer (one FSDP unit in the usual wrapping)."""
        return sum(math.prod(s) for s in self.layer_tensors)

    @property
    def root_params(self) -> int:
        """Parameters left to the root unit: embeddings, final norm, untied head."""
        return sum(math.prod(s) for s in self.root_tensors)

    @property
    def params(self) -> int:
        """Total parameter count (tied weights counted once)."""
        if self.declared_params is not None:
            return self.declared_params
        return self.root_params + self.num_layers * self.layer_params

    @property
    def largest_tensor(self) -> int:
        """The largest single module's parameters (what DeepSpeed calls the largest layer)."""
        return max(math.prod(s) for s in (*self.root_tensors, *self.layer_tensors))

    @property
    def idle_expert_params(self) -> int:
        """Parameters of the experts a token does not use, in one layer (0 without experts)."""
        if not self.experts:
            return 0
        per_expert = sum(math.prod(s[1:]) for s in self.layer_tensors if len(s) == 3)
        return (self.experts - self.experts_per_token) * per_expert

    @property
    def lookup_params(self) -> int:
        """Embedding rows read by index rather than multiplied: the input embedding (unless the
        output head shares it) and GPT-2's learned positions."""
        positions = math.prod(self.root_tensors[1]) if self.family == "gpt2" else 0
        return (0 if self.tied else self.vocab * self.hidden) + positions

    @property
    def layer_matrix_params(self) -> int:
        """Weight-matrix parameters of one decoder layer a token is multiplied with (norm
        weights and biases are added, not multiplied; MoE: only the routed experts)."""
        matrices = sum(math.prod(s) for s in self.layer_tensors if len(s) >= 2)
        return matrices - self.idle_expert_params

    @property
    def matmul_params(self) -> int:
        """Parameters each token is multiplied with (the N of 6 x N training FLOPs)."""
        if not self.exact:  # only a count: all of it but the embedding lookups
            return self.params - self.lookup_params
        root = sum(math.prod(s) for s in self.root_tensors if len(s) >= 2)
        return root - self.lookup_params + self.num_layers * self.layer_matrix_params

    def lora_layer_params(self, rank: int) -> int:
        """LoRA adapter parameters of one decoder layer, rank ``rank`` on every weight matrix
        (A: rank x in, B: out x rank; a 3-D stack of experts gets one pair per expert)."""
        total = 0
        for shape in self.layer_tensors:
            if len(shape) >= 2:
                total += math.prod(shape[:-2]) * rank * (shape[-2] + shape[-1])
        return total

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def attn_dim(self) -> int:
        return self.heads * self.head_dim

    def as_dict(self) -> dict[str, Any]:
        """The JSON view of the model."""
        return {
            "name": self.name,
            "family": self.family,
            "params": self.params,
            "exact": self.exact,
            "hidden_size": self.hidden,
            "num_layers": self.num_layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "intermediate_size": self.intermediate,
            "vocab_size": self.vocab,
            "tie_word_embeddings": self.tied,
            "num_experts": self.experts,
            "experts_per_token": self.experts_per_token,
            "layer_params": self.layer_params,
            "root_params": self.root_params,
        }


MAX_DIMENSION = 10**12
"""The largest size a config field may give (layers, widths, vocabulary)."""


def _int(config: dict[str, Any], *keys: str, default: int | None = None) -> int:
    """The first of ``keys`` present in ``config``, as a positive int."""
    for key in keys:
        value = config.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"model config: {key} must be a positive number, got {value!r}")
            if value > MAX_DIMENSION:
                raise UsageError(f"model config: {key} is out of range (at most 1e12)")
            if int(value) != value:
                raise UsageError(f"model config: {key} must be a whole number, got {value!r}")
            return int(value)
    if default is not None:
        return default
    raise UsageError(f"model config lacks {keys[0]!r}, which the planner needs")


def _optional_int(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    return (
        int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    )


def _flag(config: dict[str, Any], key: str, default: bool) -> bool:
    value = config.get(key)
    return default if value is None else bool(value)


def from_hf_config(config: dict[str, Any], name: str = "model") -> ModelSpec:
    """Read a Hugging Face ``config.json`` (as a dict) for one of the supported families.

    An unknown ``model_type`` that has the Llama keys is read as a Llama-style decoder, with a
    note saying so. Raises UsageError when a needed field is missing or not a positive number.
    """
    if not isinstance(config, dict):
        raise UsageError("model config must be a JSON object")
    # Composite configs (e.g. vision-language) keep the language model under text_config.
    if "hidden_size" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    model_type = str(config.get("model_type") or "").lower()
    if model_type == "gpt2":
        return _gpt2(config, name)
    if model_type == "gpt_neox":
        return _gpt_neox(config, name)
    notes: tuple[str, ...] = ()
    if model_type not in LLAMA_LIKE:
        notes = (
            f"model_type {model_type or '(missing)'!r} is not one of {', '.join(FAMILIES)}: "
            "counted as a Llama-style decoder (check the parameter count)",
        )
    return _llama_like(config, name, model_type or "llama", notes)


def _llama_like(
    config: dict[str, Any], name: str, family: str, notes: tuple[str, ...]
) -> ModelSpec:
    h = _int(config, "hidden_size")
    layers = _int(config, "num_hidden_layers")
    heads = _int(config, "num_attention_heads")
    kv = _int(config, "num_key_value_heads", default=heads)
    # Qwen3's config defaults head_dim to 128 rather than hidden / heads.
    head_dim = _int(config, "head_dim", default=128 if family == "qwen3" else h // heads)
    f = _int(config, "intermediate_size")
    vocab = _int(config, "vocab_size")
    tied = _flag(config, "tie_word_embeddings", False)
    # Qwen2 always has q/k/v biases; Llama/Qwen3 only with attention_bias.
    qkv_bias = family == "qwen2" or _flag(config, "attention_bias", False)
    o_bias = family != "qwen2" and _flag(config, "attention_bias", False)
    mlp_bias = _flag(config, "mlp_bias", False)
    q, kvd = heads * head_dim, kv * head_dim

    layer: list[Shape] = [(q, h), (kvd, h), (kvd, h), (h, q)]
    if qkv_bias:
        layer += [(q,), (kvd,), (kvd,)]
    if o_bias:
        layer.append((h,))
    if family == "qwen3":
        layer += [(head_dim,), (head_dim,)]  # per-head RMSNorm on queries and keys
    experts = per_token = 0
    if family == "mixtral":
        experts = _int(config, "num_local_experts")
        per_token = _int(config, "num_experts_per_tok", default=2)
        f = _int(config, "intermediate_size")
        # router, then the experts' fused gate/up and down projections (E on dim 0)
        layer += [(experts, h), (experts, 2 * f, h), (experts, h, f)]
    else:
        layer += [(f, h), (f, h), (h, f)]
        if mlp_bias:
            layer += [(f,), (f,), (h,)]
    layer += [(h,), (h,)]  # the two RMSNorm weights
    root: list[Shape] = [(vocab, h), (h,)]
    if not tied:
        root.append((vocab, h))
    return ModelSpec(
        name=name,
        family=family,
        hidden=h,
        num_layers=layers,
        heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        intermediate=f,
        vocab=vocab,
        tied=tied,
        root_tensors=tuple(root),
        layer_tensors=tuple(layer),
        experts=experts,
        experts_per_token=per_token,
        notes=notes,
        max_positions=_optional_int(config, "max_position_embeddings"),
    )


def _gpt2(config: dict[str, Any], name: str) -> ModelSpec:
    h = _int(config, "n_embd", "hidden_size")
    layers = _int(config, "n_layer", "num_hidden_layers")
    heads = _int(config, "n_head", "num_attention_heads")
    f = _int(config, "n_inner", default=4 * h)
    vocab = _int(config, "vocab_size")
    positions = _int(config, "n_positions", "max_position_embeddings")
    tied = _flag(config, "tie_word_embeddings", True)
    # Conv1D stores weights as (in, out).
    layer: list[Shape] = [(h,), (h,), (h, 3 * h), (3 * h,), (h, h), (h,)]
    layer += [(h,), (h,), (h, f), (f,), (f, h), (h,)]
    root: list[Shape] = [(vocab, h), (positions, h), (h,), (h,)]
    if not tied:
        root.append((vocab, h))
    return ModelSpec(
        name=name,
        family="gpt2",
        max_positions=positions,
        hidden=h,
        num_layers=layers,
        heads=heads,
        kv_heads=heads,
        head_dim=h // heads,
        intermediate=f,
        vocab=vocab,
        tied=tied,
        root_tensors=tuple(root),
        layer_tensors=tuple(layer),
    )


def _gpt_neox(config: dict[str, Any], name: str) -> ModelSpec:
    h = _int(config, "hidden_size")
    layers = _int(config, "num_hidden_layers")
    heads = _int(config, "num_attention_heads")
    f = _int(config, "intermediate_size")
    vocab = _int(config, "vocab_size")
    tied = _flag(config, "tie_word_embeddings", False)
    bias = _flag(config, "attention_bias", True)
    layer: list[Shape] = [(h,), (h,), (h,), (h,), (3 * h, h), (h, h), (f, h), (h, f)]
    if bias:
        layer += [(3 * h,), (h,)]
    layer += [(f,), (h,)]  # the MLP always has biases
    root: list[Shape] = [(vocab, h), (h,), (h,)]
    if not tied:
        root.append((vocab, h))
    return ModelSpec(
        name=name,
        family="gpt_neox",
        max_positions=_optional_int(config, "max_position_embeddings"),
        hidden=h,
        num_layers=layers,
        heads=heads,
        kv_heads=heads,
        head_dim=h // heads,
        intermediate=f,
        vocab=vocab,
        tied=tied,
        root_tensors=tuple(root),
        layer_tensors=tuple(layer),
    )


def from_param_count(params: int, vocab: int = 32000) -> ModelSpec:
    """A Llama-style model of about ``params`` parameters, for when only the count is known.

    The count itself is used as given; the made-up shapes (hidden = 128 x layers, SwiGLU MLP of
    8/3 x hidden, vocabulary ``vocab``) only size activations and FSDP units.
    """
    layers = max(1, round((params / (12 * 128**2)) ** (1 / 3)))
    hidden = 128 * layers
    heads = max(1, hidden // 128)
    intermediate = 256 * max(1, round(8 * hidden / 3 / 256))
    spec = _llama_like(
        {
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "intermediate_size": intermediate,
            "vocab_size": vocab,
        },
        f"{params:,}-parameter model",
        "llama",
        (
            f"only the parameter count is known: activations and unit sizes assume a Llama-style "
            f"model with {layers} layers, hidden size {hidden}, vocabulary {vocab}; pass "
            "--model-config for exact figures",
        ),
    )
    return ModelSpec(**{**spec.__dict__, "exact": False, "declared_params": params})


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a ``config.json``; UsageError when it is unreadable or not a JSON object."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read model config {path}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"model config {path} is not JSON: {exc.msg} (line {exc.lineno})"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"model config {path} must hold a JSON object")
    return data
