"""``plan``: memory, communication and step time of every strategy, and the one to use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsdp_skill.errors import UsageError
from fsdp_skill.knowledge import installed_torch_version
from fsdp_skill.plan import activations, evaluate, host, recommend, step
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
from fsdp_skill.plan.units import (
    format_bytes,
    parse_bandwidth,
    parse_bytes,
    parse_count,
    parse_flops,
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
    "--lora-rank": 65_536,
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


def _mfu(value: Any) -> float:
    """``--mfu`` as a fraction in (0, 1]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not 0 < number <= 1:
        raise UsageError(f"--mfu must be a fraction in (0, 1], got {value!r}")
    return number


def _lora_rank(value: Any) -> int:
    """``--lora-rank``: 0 (train every weight) or a positive rank."""
    if value is None or value == 0:
        return 0
    return _positive_int(value, "--lora-rank")


def _host_memory(options: dict[str, Any], gpus: int, nodes: int) -> tuple[int | None, str | None]:
    """CPU memory per node: given, else this machine's when the plan is for it, else None."""
    given = options.get("cpu_memory")
    if given:
        return parse_bytes(given, "--cpu-memory"), "given"
    local = host.local_memory_for(gpus, nodes)
    return (local, "local") if local else (None, None)


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
    cpu_memory, cpu_source = _host_memory(options, gpus, nodes)
    gpu_flops = options.get("gpu_flops")
    cpu_adam = options.get("cpu_adam_rate")
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
        cpu_memory=cpu_memory,
        cpu_memory_source=cpu_source,
        mfu=_mfu(_default(options.get("mfu"), step.DEFAULT_MFU)),
        peak_flops=parse_flops(gpu_flops, "--gpu-flops") if gpu_flops else None,
        cpu_adam_rate=parse_count(cpu_adam, "--cpu-adam-rate") if cpu_adam else None,
        lora_rank=_lora_rank(options.get("lora_rank")),
    )


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
    """Memory per GPU, CPU memory, communication and step time for each strategy, and a pick.

    ``more`` takes ``headroom`` (fraction, default 0.1), ``attention`` ("sdpa" | "eager"),
    ``reduce_dtype`` ("fp32" | "bf16" | "fp16"), ``bandwidth`` and ``inter_node_bandwidth``
    (e.g. "150GB/s"), ``interconnect`` ("nvlink" | "pcie"), ``network`` ("infiniband" |
    "ethernet"), ``cpu_memory`` (per node), ``mfu`` (default 0.4), ``gpu_flops`` (peak per
    GPU, e.g. "989TFLOPS"), ``cpu_adam_rate`` (CPU AdamW parameters/s per rank, e.g. "1.2e9"),
    ``lora_rank`` (plan LoRA adapters of that rank on a frozen base), ``torch_version``
    (default: installed) and ``local_paths`` (default True; False: ``model`` is never read as
    a local path).
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
        "mfu",
        "gpu_flops",
        "cpu_adam_rate",
        "lora_rank",
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
    checkpointing_only = bool(activation_checkpointing)
    rows, strategies = evaluate.rows_for(setup, torch_version, checkpointing_only)
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
    notes.append(_step_note(setup, rows))
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
            "cpu_memory_source": setup.cpu_memory_source,
            "mfu": setup.mfu,
            "peak_flops": step.peak_flops(setup),
            "lora_rank": setup.lora_rank,
            "trainable_params": setup.trainable_params,
        },
        "strategies": rows,
        "recommendation": recommend.recommend(
            setup, rows, strategies, torch_version, checkpointing_only
        ),
        "notes": notes,
    }


def _step_note(setup: Setup, rows: list[dict[str, Any]]) -> str:
    """What the step times assume, and how to make them yours."""
    peak = step.peak_flops(setup)
    gpu = "given" if setup.peak_flops else f"an {step.GPU_NAME}'s {setup.precision} peak"
    text = (
        f"step times assume {setup.mfu:.0%} MFU of {peak / 1e12:,.0f} TFLOP/s per GPU ({gpu}; "
        "set --mfu and --gpu-flops), one micro-batch per step, communication hidden behind "
        "compute where FSDP2 prefetches it"
    )
    if any(r["cpu_offload"] for r in rows):
        if setup.cpu_adam_rate:
            rate = f"{setup.cpu_adam_rate / 1e6:,.0f}M parameters/s per rank (given)"
        else:
            rate = (
                f"{step.CPU_ADAMW_RATE['fused'] / 1e9:.1f}B parameters/s per rank for the "
                "fused CPU AdamW on one core (torchrun's OMP_NUM_THREADS=1), as "
                "benchmarks/cpu_adam.py measured it on an AMD EPYC core: pass --cpu-adam-rate "
                "with what it measures on your nodes"
            )
        text += f"; offload's CPU optimizer step assumes {rate}"
    return text
