"""The code that applies a recommended strategy, written for the user's torch version.

Version facts: ``fully_shard`` and its policies are public in ``torch.distributed.fsdp`` from
2.6 (https://docs.pytorch.org/docs/2.6/distributed.fsdp.fully_shard.html); 2.4 and 2.5 ship
them as ``torch.distributed._composable.fsdp``; before 2.4 only FSDP1
(``FullyShardedDataParallel``) exists. torch's optimizers have fused CPU kernels from 2.4
(pytorch/pytorch#123074; 2.3's ``fused=True`` is CUDA-only), which the CPU step of offload
uses: several times the per-tensor loop (``benchmarks/cpu_adam.py``).
"""

from __future__ import annotations

from fsdp_skill.knowledge import version_tuple
from fsdp_skill.plan.setup import Setup
from fsdp_skill.plan.strategies import Strategy

# Where each family keeps its decoder layers in the Hugging Face model classes.
LAYERS_ATTR = {"gpt2": "model.transformer.h", "gpt_neox": "model.gpt_neox.layers"}
DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}
FUSED_CPU_OPTIMIZERS = (2, 4)


def fused_cpu_step(strategy: Strategy, torch_version: str | None) -> bool:
    """Whether the snippet steps an offloaded optimizer with torch's fused CPU kernel."""
    version = version_tuple(torch_version) if torch_version else (99,)
    return strategy.offload and version >= FUSED_CPU_OPTIMIZERS


def render(setup: Setup, strategy: Strategy, torch_version: str | None) -> str:
    """A Python snippet that applies ``strategy`` to a model called ``model``."""
    version = version_tuple(torch_version) if torch_version else (99,)
    if strategy.base == "ddp":
        return _ddp(setup, strategy)
    if version < (2, 4):
        return _fsdp1(setup, strategy)
    module = "torch.distributed.fsdp" if version >= (2, 6) else "torch.distributed._composable.fsdp"
    return _fsdp2(setup, strategy, module, fused_cpu_step(strategy, torch_version))


def _layers(setup: Setup) -> str:
    return LAYERS_ATTR.get(setup.spec.family, "model.model.layers")


AC_IMPORT = [
    "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (",
    "    apply_activation_checkpointing,",
    ")",
]


def _checkpointing_lines(setup: Setup, layer_cls_known: bool = False) -> list[str]:
    """Wrap every decoder layer in torch's checkpoint wrapper (needs AC_IMPORT).

    torch's own wrapper works the same for every model and transformers version.
    """
    find_cls = [] if layer_cls_known else [f"layer_cls = type({_layers(setup)}[0])"]
    return [
        "# activation checkpointing: each decoder layer keeps only its input",
        *find_cls,
        "apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, layer_cls))",
        "# no KV cache in training: recomputing a layer would append to it a second time",
        "model.config.use_cache = False",
    ]


def _fsdp2(setup: Setup, strategy: Strategy, module: str, fused: bool) -> str:
    names = ["MixedPrecisionPolicy", "fully_shard"]
    if strategy.offload:
        names.insert(0, "CPUOffloadPolicy")
    lines = [
        *_imports(setup),
        *(AC_IMPORT if strategy.checkpointing else []),
        "from torch.distributed.device_mesh import init_device_mesh",
        f"from {module} import {', '.join(names)}",
        "",
    ]
    if strategy.base == "hsdp":
        lines += [
            "# replicate across nodes, shard within each node",
            f'mesh = init_device_mesh("cuda", ({setup.nodes}, {setup.gpus_per_node}), '
            'mesh_dim_names=("replicate", "shard"))',
        ]
    else:
        lines.append(f'mesh = init_device_mesh("cuda", ({setup.gpus},))')
    if setup.precision == "fp32":
        lines.append("mp = MixedPrecisionPolicy()  # fp32 everywhere")
    else:
        lines.append(
            f"mp = MixedPrecisionPolicy(param_dtype={DTYPES[setup.precision]}, "
            f"reduce_dtype={DTYPES[setup.reduce_dtype]})"
        )
    kwargs = "mesh=mesh, mp_policy=mp"
    if strategy.offload:
        lines.append("offload = CPUOffloadPolicy()  # sharded params, grads, optimizer on CPU")
        kwargs += ", offload_policy=offload"
    lines.append("")
    if strategy.checkpointing:
        lines += [*_checkpointing_lines(setup), ""]
    reshard = strategy.reshard_after_forward
    if setup.lora_rank:
        lines += [
            "# LoRA: first model = peft.get_peft_model(model, peft.LoraConfig(",
            f'#     r={setup.lora_rank}, target_modules="all-linear")), the base in '
            f"{DTYPES[setup.precision]}",
            "",
        ]
    lines += [
        "# one FSDP unit per decoder layer, then the root (embeddings, norm, head)",
        f"for layer in {_layers(setup)}:",
        f"    fully_shard(layer, {kwargs}, reshard_after_forward={reshard})",
        f"fully_shard(model, {kwargs})",
        "",
        f"optimizer = {_optimizer(setup, fused)}",
        *_scaler(setup, 'torch.amp.GradScaler("cuda")'),
    ]
    if strategy.offload:
        lines.append(
            "# with CPU offload the optimizer steps the CPU shards"
            + (" (fused: torch's CPU kernel)" if fused else "")
        )
    return "\n".join(lines) + "\n"


def _scaler(setup: Setup, scaler: str) -> list[str]:
    """fp16 needs its loss scaled (bf16 does not)."""
    if setup.precision != "fp16":
        return []
    return [
        f"scaler = {scaler}  # fp16: scale the loss",
        "# in the training loop: scaler.scale(loss).backward(); scaler.step(optimizer); "
        "scaler.update()",
    ]


def _imports(setup: Setup) -> list[str]:
    if setup.optimizer == "adamw8bit":  # not torch's
        return ["import torch", "import torchao.optim  # pip install torchao"]
    return ["import torch"]


def _optimizer(setup: Setup, fused: bool = False) -> str:
    if setup.optimizer == "adamw8bit":
        # not torch's: name it in full, with the package to install
        return "torchao.optim.AdamW8bit(model.parameters(), lr=3e-4)"
    extra = ", fused=True" if fused else ""
    if setup.optimizer.startswith("sgd"):
        momentum = 0.0 if setup.optimizer == "sgd-nomomentum" else 0.9
        return f"torch.optim.SGD(model.parameters(), lr=1e-2, momentum={momentum}{extra})"
    cls = "Adam" if setup.optimizer == "adam" else "AdamW"
    return f"torch.optim.{cls}(model.parameters(), lr=3e-4{extra})"


def _fsdp1(setup: Setup, strategy: Strategy) -> str:
    sharding = {
        "full-shard": "FULL_SHARD",
        "no-reshard": "SHARD_GRAD_OP",
        "hsdp": "HYBRID_SHARD",
    }[strategy.base]
    dtype = DTYPES[setup.precision]
    lines = [
        "# torch < 2.4 has no fully_shard: FSDP1 with the equivalent sharding strategy",
        "import functools",
        "",
        *_imports(setup),
        *(AC_IMPORT if strategy.checkpointing else []),
        "from torch.distributed.fsdp import (",
        "    CPUOffload,",
        "    FullyShardedDataParallel as FSDP,",
        "    MixedPrecision,",
        "    ShardingStrategy,",
        ")",
        "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy",
        "",
        "layer_cls = type(" + _layers(setup) + "[0])",
        "model = FSDP(",
        "    model,",
        "    auto_wrap_policy=functools.partial(",
        "        transformer_auto_wrap_policy, transformer_layer_cls={layer_cls}",
        "    ),",
        f"    sharding_strategy=ShardingStrategy.{sharding},",
        f"    mixed_precision=MixedPrecision(param_dtype={dtype}, "
        f"reduce_dtype={DTYPES[setup.reduce_dtype]}),",
        f"    cpu_offload=CPUOffload(offload_params={strategy.offload}),",
        "    device_id=torch.cuda.current_device(),",
        "    use_orig_params=True,",
        ")",
        f"optimizer = {_optimizer(setup)}",
        *_scaler(setup, "ShardedGradScaler()"),
    ]
    if setup.precision == "fp16":
        lines.insert(
            lines.index("from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy"),
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler",
        )
    if strategy.checkpointing:  # after wrapping, as FSDP1 expects
        lines += ["", *_checkpointing_lines(setup, layer_cls_known=True)]
    return "\n".join(lines) + "\n"


def _ddp(setup: Setup, strategy: Strategy) -> str:
    lines = [
        *_imports(setup),
        *(AC_IMPORT if strategy.checkpointing else []),
        "from torch.nn.parallel import DistributedDataParallel as DDP",
        "",
    ]
    if strategy.checkpointing:
        lines += [*_checkpointing_lines(setup), ""]
    lines += [
        'device = torch.device("cuda", torch.cuda.current_device())',
        "model = DDP(model.to(device), device_ids=[device.index], gradient_as_bucket_view=True)",
        f"optimizer = {_optimizer(setup)}",
        "",
        "# in the training loop:",
    ]
    if setup.precision == "fp32":
        lines.append("#     loss = model(**batch).loss")
    else:
        lines.append(f'#     with torch.autocast("cuda", dtype={DTYPES[setup.precision]}):')
        lines.append("#         loss = model(**batch).loss")
    if setup.precision == "fp16":
        lines[lines.index("# in the training loop:") : lines.index("# in the training loop:")] = [
            *_scaler(setup, 'torch.amp.GradScaler("cuda")'),
            "",
        ]
    return "\n".join(lines) + "\n"
