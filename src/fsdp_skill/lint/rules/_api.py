"""Predicates over resolved names that several rules share (which calls are collectives,
optimizers, mixed-precision policies, ...)."""

from __future__ import annotations

import ast

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import constant, is_under, key_of
from fsdp_skill.lint.records import Call, Func

COLLECTIVES = {
    "all_reduce",
    "all_reduce_coalesced",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "broadcast_object_list",
    "all_gather",
    "all_gather_object",
    "all_gather_into_tensor",
    "all_gather_coalesced",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "reduce",
    "new_group",
    "new_subgroups",
}
STATE_DICT_GATHERS = {
    "get_model_state_dict",
    "get_optimizer_state_dict",
    "get_state_dict",
    "full_optim_state_dict",
    "optim_state_dict",
    "sharded_optim_state_dict",
    "summon_full_params",
    "scatter_full_optim_state_dict",
}
DCP_CALLS = {"save", "load", "async_save", "save_state_dict", "load_state_dict"}
FSDP1_METHODS = {"state_dict", "summon_full_params", "clip_grad_norm_"}
FSDP2_METHODS = {"unshard", "full_tensor"}

DTYPES = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
}
POLICIES = {"MixedPrecision", "MixedPrecisionPolicy"}


def last(name: str | None) -> str:
    return name.rsplit(".", 1)[-1] if name else ""


def is_collective(m: FileModel, call: Call) -> str | None:
    """The collective or state-dict-gathering operation ``call`` performs, or None."""
    name = m.call_name(call)
    if name:
        tail = last(name)
        if is_under(name, "torch.distributed.checkpoint") and tail in DCP_CALLS:
            return name
        if is_under(name, "torch.distributed") and tail in COLLECTIVES | STATE_DICT_GATHERS:
            return name
        return None
    func = call.node.func
    if isinstance(func, ast.Attribute):
        key = key_of(func.value)
        if key is None:
            return "DTensor.full_tensor" if func.attr == "full_tensor" else None
        kinds = m.shard_kinds(key, call.func)
        if kinds == {"fsdp1"} and func.attr in FSDP1_METHODS:
            return f"{key}.{func.attr}"
        if kinds == {"fsdp2"} and func.attr == "unshard":
            return f"{key}.{func.attr}"
        if func.attr == "full_tensor":
            return f"{key}.full_tensor"
    return None


def on_subset(call: Call) -> bool:
    """True if the call may legitimately run on some ranks only: it names its own group
    (the branch may select exactly the members), or it does not communicate at all."""
    node = call.node
    for kw in node.keywords:
        if kw.arg in ("group", "process_group", "pg") and constant(kw.value) is not None:
            return True
        if kw.arg in ("no_dist", "use_local_synchronization") and constant(kw.value) is True:
            return True
    return False


def is_optimizer(m: FileModel, call: Call) -> bool:
    """True if ``call`` builds a torch optimizer (``torch.optim.AdamW(...)`` and friends)."""
    name = m.call_name(call)
    if not name:
        return False
    tail = last(name)
    if is_under(name, "torch.optim") and tail[:1].isupper():
        return not (".lr_scheduler" in name or ".swa_utils" in name or tail == "Optimizer")
    return tail == "ZeroRedundancyOptimizer"


def optimizer_calls(m: FileModel) -> list[Call]:
    """Every optimizer construction in the file (computed once per file)."""
    if "optimizers" not in m.memo:
        candidates = m.calls_to(*m.imported_classes("torch"), module="torch")
        m.memo["optimizers"] = [c for c in candidates if is_optimizer(m, c)]
    return m.memo["optimizers"]


def dtype_of(m: FileModel, expr: ast.expr | None, func: Func) -> str | None:
    """``"fp16"``/``"bf16"``/``"fp32"`` when every value ``expr`` may hold is that dtype."""
    if expr is None:
        return None
    found = set()
    for value in m.resolve(expr, func):
        name = m.qualname(value)
        if name and is_under(name, "torch") and last(name) in DTYPES:
            found.add(DTYPES[last(name)])
        else:
            return None
    return found.pop() if len(found) == 1 else None


def policy_calls(m: FileModel) -> list[Call]:
    """``MixedPrecision(...)`` (FSDP1) and ``MixedPrecisionPolicy(...)`` (FSDP2) calls, except
    policies stored in a plain name that is never read (a preset the script does not use)."""
    if "policies" not in m.memo:
        m.memo["policies"] = [
            c
            for c in m.calls_to(*POLICIES, module="torch.distributed")
            if not any(
                "." not in a.key and "[" not in a.key and a.key not in m.identifiers
                for a in m.bound_to(c.node)
            )
        ]
    return m.memo["policies"]


def kwarg_is(call: ast.Call, name: str, value: object) -> bool:
    """True if ``call`` passes ``name=value`` as a literal."""
    return any(kw.arg == name and constant(kw.value) == value for kw in call.keywords)


def is_distributed(m: FileModel) -> bool:
    """True if the file sets up or uses torch.distributed data parallelism."""
    return bool(
        m.calls_to("init_process_group", "init_device_mesh", module="torch.distributed")
        or m.calls_to("fully_shard", "FullyShardedDataParallel", module="torch.distributed")
        or m.calls_to("DistributedDataParallel", module="torch.nn")
    )


def spawn_calls(m: FileModel) -> list[Call]:
    """Calls that start worker processes and pass each its index: ``torch.multiprocessing``'s
    ``spawn`` / ``start_processes``, and an unresolved ``mp.spawn(fn, nprocs=n)`` (``mp``
    from a star import: the ``nprocs`` keyword is that function's). Computed once per file."""
    if "spawn_calls" not in m.memo:
        found = m.calls_to("spawn", "start_processes", module="torch.multiprocessing")
        found += [
            c
            for c in m.method_calls("spawn")
            if any(kw.arg == "nprocs" for kw in c.node.keywords) and c not in found
        ]
        m.memo["spawn_calls"] = found
    return m.memo["spawn_calls"]


def spawned_function(m: FileModel, call: Call) -> Func | None:
    """The local function a spawn call starts (its first argument, or ``fn=``)."""
    node = call.node
    target = next((kw.value for kw in node.keywords if kw.arg == "fn"), None)
    if target is None and node.args:
        target = node.args[0]
    return m.function_ref(target, call.func) if target is not None else None
