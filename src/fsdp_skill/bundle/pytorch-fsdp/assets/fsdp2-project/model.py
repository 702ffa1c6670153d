"""The model: built on the meta device, initialised and sharded one block at a time.

FSDP2 (``fully_shard`` on a 1-D mesh, or HSDP on a 2-D replicate x shard mesh) or FSDP1, with
optional activation checkpointing (full or selective), ``torch.compile`` per block, and
pretrained weights read shard by shard, so that no rank ever holds the whole model.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from options import ConfigError, read_json
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)

# Selective activation checkpointing keeps the outputs of these (the expensive matmuls and
# attention) and recomputes everything else in a block (norms, activations, rotary, adds).
SAVED_BY_SELECTIVE_AC = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def resolve(cfg: dict, path: str) -> str:
    """A path relative to the config file, or a hub name left as it is."""
    candidate = Path(cfg["base_dir"]) / path
    return str(candidate) if candidate.exists() else path


def looks_like_a_path(name: str, base_dir: str) -> bool:
    """True for what can only be meant as a local folder: ``./x``, ``/x``, ``~/x``, ``a/b/c``,
    or ``a/b`` where ``a`` is a folder here (a hub id is ``org/name``)."""
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name:
        return True
    head = name.split("/")[0]
    return "/" in name and (Path(base_dir) / head).is_dir()


def model_source(cfg: dict) -> str | None:
    """The local folder of ``model.name_or_path`` (downloaded from the hub if needed), or None."""
    name = cfg["model"]["name_or_path"]
    if not name:
        return None
    local = Path(cfg["base_dir"]) / Path(name).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ConfigError(f"{cfg['config_file']}: model.name_or_path {name}: no config.json")
        return str(local)
    if looks_like_a_path(name, cfg["base_dir"]):
        raise ConfigError(f"{cfg['config_file']}: model.name_or_path {name}: no such folder")
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "tokenizer*"]
    try:
        return snapshot_download(name, allow_patterns=patterns)
    except Exception as exc:  # offline, unknown id, gated: one line, not a traceback
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{cfg['config_file']}: model.name_or_path {name}: cannot get it from the hub "
            f"({message})"
        ) from None


def load_hf_config(cfg: dict, source: str | None):
    """The model's Hugging Face config, from the checkpoint or from model.config."""
    from transformers import AutoConfig

    if source:
        try:
            return AutoConfig.from_pretrained(source)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{source}/config.json: {str(exc).splitlines()[0]}") from None
    path = Path(cfg["base_dir"]) / cfg["model"]["config"]
    fields = read_json(path, "model config")
    if not isinstance(fields.get("model_type"), str):
        raise ConfigError(f'{path}: model_type must be a string, like "llama"')
    try:
        return AutoConfig.for_model(fields.pop("model_type"), **fields)
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: {str(exc).splitlines()[0]}") from None


def check_model_options(cfg: dict, hf_config) -> None:
    """Options that only the model's config can check (before any weights exist)."""
    limit = getattr(hf_config, "max_position_embeddings", None)
    seq_len = cfg["data"]["seq_len"]
    if limit is not None and seq_len > limit:
        raise ConfigError(
            f"{cfg['config_file']}: data.seq_len {seq_len} exceeds the model's "
            f"max_position_embeddings {limit}"
        )


def transformer_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks to shard one by one (Hugging Face names them in _no_split_modules)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:  # fall back to the longest ModuleList of identical modules
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
        lists = [m for m in lists if len({type(c) for c in m}) == 1]
        blocks = list(max(lists, key=len)) if lists else []
    if not blocks:
        raise ConfigError("found no transformer blocks to shard in this model")
    return blocks


def materialize_(model: torch.nn.Module, module: torch.nn.Module, device: torch.device) -> None:
    """Give ``module``'s own meta tensors storage on ``device`` and initialise them.

    Initialisation uses the model's own ``_init_weights`` (Hugging Face's per-module scheme,
    which also recomputes buffers such as rotary frequencies). Each rank draws the full,
    unsharded tensors from the same seeded generator, so the initial model does not depend
    on the world size.
    """
    own = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
    if not any(t.is_meta for t in own):
        return
    module.to_empty(device=device, recurse=False)
    with torch.no_grad():
        model._init_weights(module)


def mixed_precision(precision: str) -> tuple[torch.dtype | None, torch.dtype | None]:
    """(parameter dtype for compute, gradient reduction dtype)."""
    low = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[precision]
    return low, (torch.float32 if low is not None else None)


def selective_ac_policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    if op in SAVED_BY_SELECTIVE_AC:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def enable_activation_checkpointing(model, mode: bool | str) -> None:
    """Recompute each block's activations in backward: all of them, or all but the matmuls."""
    kwargs: dict = {"use_reentrant": False}
    if mode == "selective":
        from torch.utils.checkpoint import create_selective_checkpoint_contexts

        kwargs["context_fn"] = partial(create_selective_checkpoint_contexts, selective_ac_policy)
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.24
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def original_name(name: str) -> str:
    """A parameter's name without the wrappers' prefixes (FSDP1, activation checkpointing)."""
    for wrapper in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module."):
        name = name.replace(wrapper, "")
    return name


def count_parameters(model: torch.nn.Module) -> int:
    """Every parameter once (tied ones once), at full size: the same for FSDP1 and FSDP2."""
    return sum(p.numel() for p in model.parameters())


def flops_per_token(model: torch.nn.Module, seq_len: int) -> float:
    """Training FLOPs per token: 6 x matmul parameters + attention scores (PaLM appendix B)."""
    config = model.config
    params = count_parameters(model)
    embedding = model.get_input_embeddings().weight.numel()
    params -= embedding  # a lookup, not a matmul
    if getattr(config, "tie_word_embeddings", False):
        params += embedding  # ...but the tied head is one
    layers, hidden = config.num_hidden_layers, config.hidden_size
    return 6 * params + 12 * layers * hidden * seq_len


def build_model(cfg: dict, hf_config, source: str | None, device, mesh: DeviceMesh | None):
    """The sharded model and ``{"parameters", "flops_per_token", "matrices"}``, counted
    before sharding (the same for FSDP1 and FSDP2)."""
    import transformers
    from transformers import AutoModelForCausalLM

    if int(transformers.__version__.split(".")[0]) < 5:
        # Older _init_weights leaves buffers such as rotary frequencies uninitialised after
        # meta-device construction, which would train a silently broken model.
        raise SystemExit("train.py: needs transformers 5 or newer (pip install -U transformers)")

    # Meta device: the structure without any storage, so no rank ever holds the whole model.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            hf_config, dtype=torch.float32, attn_implementation=cfg["model"]["attn_implementation"]
        )
    info = {
        "parameters": count_parameters(model),
        "flops_per_token": flops_per_token(model, cfg["data"]["seq_len"]),
        # Matrices get weight decay, norms and biases do not. Decided here, on full shapes:
        # FSDP1 (use_orig_params) shows every parameter as a flat 1-D shard afterwards.
        "matrices": {name for name, p in model.named_parameters() if p.ndim >= 2},
    }
    fsdp = cfg["fsdp"]
    if fsdp["activation_checkpointing"]:
        enable_activation_checkpointing(model, fsdp["activation_checkpointing"])
    model.config.use_cache = False  # no KV cache in training
    torch.manual_seed(cfg["train"]["seed"])  # the same initial weights on every rank
    if fsdp["version"] == 2:
        model = shard_fsdp2(model, cfg, device, mesh)
    else:
        model = shard_fsdp1(model, cfg, device)
    if source:
        load_pretrained_weights(model, source, fsdp["version"])
    return model, info


def shard_fsdp2(model, cfg: dict, device: torch.device, mesh: DeviceMesh) -> torch.nn.Module:
    """fully_shard each transformer block, then the root (embeddings, final norm, head).

    On a 2-D mesh (replicate, shard) this is HSDP: parameters are sharded within each
    replica group and gradients are all-reduced across the replicas.
    """
    fsdp = cfg["fsdp"]
    param_dtype, reduce_dtype = mixed_precision(fsdp["precision"])
    offload: OffloadPolicy = OffloadPolicy()
    if fsdp["cpu_offload"]:
        offload = CPUOffloadPolicy(pin_memory=device.type == "cuda")
    mp_policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    for block in transformer_blocks(model):
        for module in block.modules():  # one block at a time holds full-size tensors
            materialize_(model, module, device)
        if fsdp["compile"]:
            # Per block, before sharding: the compiled graph is the block's math, and FSDP's
            # all-gathers and reduce-scatters stay in its hooks around it.
            block.compile()
        fully_shard(
            block,
            mesh=mesh,
            mp_policy=mp_policy,
            offload_policy=offload,
            reshard_after_forward=fsdp["reshard_after_forward"],
        )
    for module in model.modules():  # what is left: embeddings, final norm, head, rotary
        materialize_(model, module, device)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()  # materializing module by module broke the sharing
    # The root's parameters are needed right after forward (the head) and first in backward.
    fully_shard(
        model, mesh=mesh, mp_policy=mp_policy, offload_policy=offload, reshard_after_forward=False
    )
    return model


def shard_fsdp1(model, cfg: dict, device: torch.device) -> torch.nn.Module:
    """FullyShardedDataParallel with one unit per transformer block (the older API)."""
    from torch.distributed.fsdp import CPUOffload, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    param_dtype, reduce_dtype = mixed_precision(cfg["fsdp"]["precision"])
    block_types = {type(b) for b in transformer_blocks(model)}
    offload = cfg["fsdp"]["cpu_offload"]
    if offload and device.type == "cpu":  # FSDP1 offloads only from an accelerator
        if dist.get_rank() == 0:
            print("fsdp.cpu_offload is ignored: FSDP1 offloads only from an accelerator")
        offload = False
    if cfg["fsdp"]["compile"]:
        for block in transformer_blocks(model):
            block.compile()
    tied = getattr(model.config, "tie_word_embeddings", False)

    def init_fn(module: torch.nn.Module) -> None:
        materialize_(model, module, device)
        if tied and module is model:
            model.tie_weights()

    return FSDP(
        model,
        auto_wrap_policy=partial(transformer_auto_wrap_policy, transformer_layer_cls=block_types),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        mixed_precision=MixedPrecision(
            param_dtype=param_dtype, reduce_dtype=reduce_dtype, buffer_dtype=None
        )
        if param_dtype
        else None,
        cpu_offload=CPUOffload(offload_params=offload),
        device_id=device,
        param_init_fn=init_fn,
        use_orig_params=True,
    )


def safetensors_files(source: str) -> dict[str, str]:
    """``{tensor name: file}`` of a checkpoint folder's safetensors weights ({} if none)."""
    folder = Path(source)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: str(folder / file) for name, file in weight_map.items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        return {}
    from safetensors import safe_open

    with safe_open(str(single), framework="pt") as f:
        return dict.fromkeys(f.keys(), str(single))


def load_pretrained_weights(model: torch.nn.Module, source: str, fsdp_version: int) -> None:
    """Copy a checkpoint's weights into the sharded model.

    FSDP2 with safetensors: every rank reads, through a memory map, only the rows of each
    tensor that its own shard holds, so no rank ever has more than its shards in memory.
    Otherwise (FSDP1, or .bin weights) rank 0 loads the model on CPU and broadcasts.
    """
    files = safetensors_files(source)
    if fsdp_version == 2 and files:
        load_safetensors_shards(model, files)
        return
    from transformers import AutoModelForCausalLM

    full = {}
    if dist.get_rank() == 0:
        full = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).state_dict()
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, full, options=options)


def load_safetensors_shards(model: torch.nn.Module, files: dict[str, str]) -> None:
    """Fill each DTensor parameter's local shard from its slice of the safetensors files."""
    from safetensors import safe_open
    from torch.distributed.tensor import DTensor

    # A private helper, public in all of torch 2.4-2.13: the shape and offset of this rank's
    # part of a DTensor, whatever its placements (Shard(0), or (Replicate, Shard(0)) in HSDP).
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    prefix = getattr(model, "base_model_prefix", "") + "."
    state = model.state_dict()
    # Names that share one parameter (a head tied to the embedding): a checkpoint stores one.
    owner = {n: id(p) for n, p in model.named_parameters(remove_duplicate=False)}
    loaded: set[int] = set()
    handles: dict[str, object] = {}
    missing = []
    for name, tensor in state.items():
        key = name if name in files else name.removeprefix(prefix)
        if key not in files:
            missing.append(name)
            continue
        path = files[key]
        if path not in handles:
            handles[path] = safe_open(path, framework="pt")
        view = handles[path].get_slice(key)
        if isinstance(tensor, DTensor):
            shape, offset = compute_local_shape_and_global_offset(
                tensor.shape, tensor.device_mesh, tensor.placements
            )
            index = tuple(slice(o, o + s) for o, s in zip(offset, shape, strict=True))
            local = tensor.to_local()
        else:
            index, local = tuple(slice(None) for _ in tensor.shape), tensor
        with torch.no_grad():
            local.copy_(view[index] if index else view[:])
        loaded.add(owner.get(name, id(tensor)))
    absent = sorted(n for n in missing if owner.get(n) not in loaded)
    if absent:
        raise ConfigError(f"the checkpoint has no weights for {absent[:3]}")
