"""``plan``: memory and communication of every strategy, and the one to use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsdp_skill.errors import UsageError
from fsdp_skill.knowledge import installed_torch_version
from fsdp_skill.plan import activations, comm, memory, snippet
from fsdp_skill.plan.activations import ATTENTION
from fsdp_skill.plan.model import ModelSpec, from_hf_config, from_param_count, load_config_file
from fsdp_skill.plan.setup import (
    COMPUTE_BYTES,
    INTERCONNECTS,
    NETWORKS,
    OPTIMIZER_BYTES,
    REDUCE_BYTES,
    Setup,
    check_choice,
    check_layout,
)
from fsdp_skill.plan.strategies import Strategy, candidates
from fsdp_skill.plan.units import (
    format_bytes,
    format_seconds,
    parse_bandwidth,
    parse_bytes,
    parse_count,
)

DEFAULT_SEQ_LEN = 4096
DEFAULT_HEADROOM = 0.10


def load_model(
    params: str | int | float | None = None,
    model_config: str | Path | dict | None = None,
    model: str | None = None,
    local_paths: bool = True,
) -> tuple[ModelSpec, str]:
    """The model from exactly one of a count, a config file (or dict), or a model id.

    ``local_paths`` False: a model id is a bundled name or a hub id, never a local path.
    """
    given = [x for x in (params, model_config, model) if x is not None]
    if len(given) != 1:
        raise UsageError("give exactly one of --params, --model-config or --model")
    if params is not None:
        return from_param_count(parse_count(params)), "params"
    if model_config is not None:
        if isinstance(model_config, dict):
            return from_hf_config(model_config, "config"), "config"
        data = load_config_file(model_config)
        return from_hf_config(data, Path(model_config).stem), str(model_config)
    from fsdp_skill.plan.hub import resolve

    data, source = resolve(str(model), local_paths=local_paths)
    return from_hf_config(data, str(model)), source


LIMITS = {
    "--gpus": 1_000_000,
    "--nodes": 100_000,
    "--seq-len": 10_000_000,
    "--micro-batch": 1_000_000,
}
"""The largest value each whole-number option takes (the MCP server's bounds too)."""


def _positive_int(value: Any, what: str) -> int:
    """``value`` as an int from 1 to ``LIMITS[what]`` (a whole float or digit string is fine)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        number = int(value)
    if number is None or number < 1:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise UsageError(f"{what} must be a whole number of at least 1, got {shown}")
    if number > LIMITS[what]:
        raise UsageError(f"{what} must be at most {LIMITS[what]:,}")
    return number


def _fraction(value: Any, what: str) -> float:
    """``value`` as a float in [0, 1)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = -1.0
    if not 0 <= number < 1:
        raise UsageError(f"{what} must be a fraction in [0, 1), got {value!r}")
    return number


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


def build_setup(spec: ModelSpec, **options: Any) -> Setup:
    """Check every option and bundle them with the model."""
    gpus = _positive_int(options.get("gpus"), "--gpus")
    nodes = _positive_int(options.get("nodes", 1), "--nodes")
    check_layout(gpus, nodes)
    if options.get("gpu_memory") is None:
        raise UsageError("--gpu-memory is required (e.g. 80GB)")
    headroom = _fraction(_default(options.get("headroom"), DEFAULT_HEADROOM), "--headroom")
    interconnect = check_choice(
        options.get("interconnect", "nvlink"), INTERCONNECTS, "interconnect"
    )
    network = check_choice(options.get("network", "infiniband"), NETWORKS, "network")
    bandwidth = options.get("bandwidth")
    inter = options.get("inter_node_bandwidth")
    cpu_memory = options.get("cpu_memory")
    return Setup(
        spec=spec,
        gpus=gpus,
        nodes=nodes,
        gpu_memory=parse_bytes(options["gpu_memory"], "--gpu-memory"),
        seq_len=_positive_int(_default(options.get("seq_len"), DEFAULT_SEQ_LEN), "--seq-len"),
        micro_batch=_positive_int(_default(options.get("micro_batch"), 1), "--micro-batch"),
        precision=check_choice(options.get("precision", "bf16"), COMPUTE_BYTES, "precision"),
        optimizer=check_choice(options.get("optimizer", "adamw"), OPTIMIZER_BYTES, "optimizer"),
        attention=check_choice(options.get("attention", "sdpa"), ATTENTION, "attention"),
        headroom=headroom,
        reduce_dtype=check_choice(
            options.get("reduce_dtype", "fp32"), REDUCE_BYTES, "reduce dtype"
        ),
        intra_bandwidth=(
            parse_bandwidth(bandwidth, "--bandwidth") if bandwidth else INTERCONNECTS[interconnect]
        ),
        inter_bandwidth=(
            parse_bandwidth(inter, "--inter-node-bandwidth") if inter else NETWORKS[network]
        ),
        bandwidth_assumed=not bandwidth,
        cpu_memory=parse_bytes(cpu_memory, "--cpu-memory") if cpu_memory else None,
    )


def _strategy_row(setup: Setup, strategy: Strategy) -> dict[str, Any]:
    mem = memory.estimate(setup, strategy)
    traffic = comm.estimate(setup, strategy)
    fits_gpu = mem.total <= setup.usable_gpu_memory
    fits_cpu = setup.cpu_memory is None or mem.cpu_per_node <= setup.cpu_memory
    notes = [f"FSDP1/DeepSpeed equivalent: {strategy.fsdp1}"]
    world = memory.shard_world(setup, strategy)
    states = mem.params + mem.grads + mem.optimizer + mem.cpu_per_rank
    per_param = 4 + 4 + setup.optimizer_bytes
    even = setup.spec.params / world
    padded = memory.model_shard_numel(setup.spec, world)
    where = " (on the CPU)" if strategy.offload else ""
    if setup.spec.exact and padded > even * 1.01:
        notes.append(
            f"model states {format_bytes(states)} on the fullest rank{where}, "
            f"{padded / even:.2f}x the even {per_param} bytes x {setup.spec.params:,} params / "
            f"{world}: FSDP2 shards each tensor on dim 0, and a tensor with fewer rows than "
            "ranks (e.g. stacked experts) leaves some ranks a full row and others none; "
            "fully_shard's shard_placement_fn can shard such tensors on dim 1 instead"
        )
    else:
        notes.append(
            f"model states {format_bytes(states)} per rank{where} = {per_param} bytes x "
            f"{setup.spec.params:,} params / {world}"
        )
    if not fits_cpu:
        notes.append(f"needs {format_bytes(mem.cpu_per_node)} of CPU memory per node")
    return {
        "name": strategy.name,
        "fits": fits_gpu and fits_cpu,
        "per_gpu_bytes": mem.per_gpu(),
        "cpu_bytes": mem.cpu_per_node,
        "cpu_bytes_per_rank": mem.cpu_per_rank,
        "peak_phase": max(mem.phases, key=mem.phases.get),
        "comm_bytes_per_step": traffic.total,
        "comm_seconds_per_step": round(traffic.seconds, 4),
        "comm": traffic.as_dict(),
        "shard_size": world,
        "replicate_size": setup.gpus // world,
        "reshard_after_forward": strategy.reshard_after_forward,
        "cpu_offload": strategy.offload,
        "activation_checkpointing": strategy.checkpointing,
        "notes": notes,
    }


def _loss_note(setup: Setup) -> str | None:
    """Advice when the output head and loss dominate activation memory (large vocabularies)."""
    acts = activations.estimate(
        setup.spec, setup.micro_batch, setup.seq_len, setup.compute_bytes, setup.attention, True
    )
    head = acts.head + acts.logits + acts.loss_backward
    # worth saying when it is most of what checkpointing leaves and a good part of the GPU
    if head <= 0.3 * acts.at_loss_backward or head <= 0.1 * setup.usable_gpu_memory:
        return None
    return (
        f"the output head and loss hold {format_bytes(head)} per GPU at the start of backward "
        f"(logits of {setup.spec.vocab:,} classes per token, their fp32 log-softmax and its "
        "gradients): a chunked or fused cross-entropy that never materialises all logits "
        "removes most of it"
    )


def _rank_key(row: dict[str, Any]) -> tuple:
    # Offload and recomputation cost more than extra collectives, so they come last; DDP,
    # when it fits, needs no parameter gathering at all; then the least communication.
    return (
        row["cpu_offload"],
        row["activation_checkpointing"],
        row["reshard_after_forward"] is not None,  # False for DDP, which has no resharding
        row["comm_seconds_per_step"],
    )


def _recommend(setup: Setup, rows: list[dict], strategies: dict[str, Strategy], torch_version):
    usable = format_bytes(setup.usable_gpu_memory)
    fitting = sorted((r for r in rows if r["fits"]), key=_rank_key)
    if not fitting:
        best = min(rows, key=lambda r: r["per_gpu_bytes"]["total"])
        return {
            "strategy": None,
            "why": (
                f"nothing fits in {usable} per GPU ({format_bytes(setup.gpu_memory)} less "
                f"{setup.headroom:.0%} headroom); the smallest is {best['name']} at "
                f"{format_bytes(best['per_gpu_bytes']['total'])}. Add GPUs, shorten --seq-len, "
                "lower --micro-batch, or shard further with tensor/context parallelism."
            ),
            "snippet": "",
        }
    pick = fitting[0]
    strategy = strategies[pick["name"]]
    too_big = [r["name"] for r in rows if not r["fits"] and not r["cpu_offload"]]
    why = (
        f"{pick['name']} fits: {format_bytes(pick['per_gpu_bytes']['total'])} of {usable} usable "
        f"per GPU ({format_bytes(setup.gpu_memory)} less {setup.headroom:.0%} headroom), with an "
        f"estimated {format_seconds(pick['comm_seconds_per_step'])} of communication per step. "
        "Chosen as the first that fits in this order: without CPU offload, then without "
        "activation checkpointing (both slow a step down), DDP before sharding (no parameter "
        "gathering), then the least communication."
    )
    if too_big:
        why += f" Does not fit: {', '.join(too_big)}."
    return {
        "strategy": pick["name"],
        "why": why,
        "snippet": snippet.render(setup, strategy, torch_version),
        "torch_version": torch_version,
    }


def plan(
    params: str | int | float | None = None,
    model_config: str | Path | dict | None = None,
    model: str | None = None,
    gpus: int | None = None,
    nodes: int = 1,
    gpu_memory: str | int | None = None,
    seq_len: int = DEFAULT_SEQ_LEN,
    micro_batch: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    activation_checkpointing: bool = False,
    **more: Any,
) -> dict[str, Any]:
    """Memory per GPU, CPU memory, communication per step for each strategy, and a pick.

    ``more`` takes ``headroom`` (fraction, default 0.1), ``attention`` ("sdpa" | "eager"),
    ``reduce_dtype`` ("fp32" | "bf16" | "fp16"), ``bandwidth`` and ``inter_node_bandwidth``
    (e.g. "150GB/s"), ``interconnect`` ("nvlink" | "pcie"), ``network`` ("infiniband" |
    "ethernet"), ``cpu_memory`` (per node), ``torch_version`` (default: installed) and
    ``local_paths`` (default True; False: ``model`` is never read as a local path).
    With ``activation_checkpointing`` only checkpointed strategies are compared.
    Raises UsageError on bad input.
    """
    known = {
        "headroom",
        "attention",
        "reduce_dtype",
        "bandwidth",
        "inter_node_bandwidth",
        "interconnect",
        "network",
        "cpu_memory",
        "torch_version",
        "local_paths",
    }
    unknown = sorted(set(more) - known)
    if unknown:
        raise UsageError(f"unknown plan option(s): {', '.join(unknown)}")
    local_paths = more.pop("local_paths", True) is not False
    spec, source = load_model(params, model_config, model, local_paths)
    setup = build_setup(
        spec,
        gpus=gpus,
        nodes=nodes,
        gpu_memory=gpu_memory,
        seq_len=seq_len,
        micro_batch=micro_batch,
        precision=precision,
        optimizer=optimizer,
        **{k: v for k, v in more.items() if k != "torch_version" and v is not None},
    )
    torch_version = more.get("torch_version") or installed_torch_version()
    strategies = {s.name: s for s in candidates(setup.nodes, bool(activation_checkpointing))}
    rows = [_strategy_row(setup, s) for s in strategies.values()]
    notes = list(spec.notes)
    notes.append(
        "total is the peak over a step (peak_phase says where), not the sum of the columns: "
        "backward starts with every activation alive and no FSDP gradient yet, gradients and "
        "reduce buffers grow as activations are freed, and the optimizer step (temporaries in "
        "optimizer_step) runs with the activations gone"
    )
    notes.append(
        "totals leave out the CUDA context and NCCL's own buffers (about 0.5-2 GiB per GPU): "
        "keep the headroom"
    )
    if setup.bandwidth_assumed:
        notes.append(
            f"communication times assume {setup.intra_bandwidth / 1e9:.0f} GB/s within a node"
            + (
                f" and {setup.inter_bandwidth / 1e9:.0f} GB/s between nodes"
                if setup.nodes > 1
                else ""
            )
            + " (bus bandwidth); pass --bandwidth with what nccl-tests measures on yours"
        )
    if spec.max_positions and setup.seq_len > spec.max_positions:
        notes.append(
            f"--seq-len {setup.seq_len} is longer than the {spec.max_positions} positions "
            "the model config declares"
        )
    loss_note = _loss_note(setup)
    if loss_note:
        notes.append(loss_note)
    if setup.precision == "fp16":
        notes.append("fp16 compute needs loss scaling (a gradient scaler); bf16 does not")
    return {
        "model": {**spec.as_dict(), "source": source},
        "setup": {
            "gpus": setup.gpus,
            "nodes": setup.nodes,
            "gpus_per_node": setup.gpus_per_node,
            "gpu_memory": setup.gpu_memory,
            "usable_gpu_memory": int(setup.usable_gpu_memory),
            "headroom": setup.headroom,
            "seq_len": setup.seq_len,
            "micro_batch": setup.micro_batch,
            "precision": setup.precision,
            "reduce_dtype": setup.reduce_dtype,
            "optimizer": setup.optimizer,
            "attention": setup.attention,
            "intra_node_bandwidth": setup.intra_bandwidth,
            "inter_node_bandwidth": setup.inter_bandwidth,
            "cpu_memory": setup.cpu_memory,
        },
        "strategies": rows,
        "recommendation": _recommend(setup, rows, strategies, torch_version),
        "notes": notes,
    }
