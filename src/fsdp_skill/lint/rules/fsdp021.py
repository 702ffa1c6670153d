"""FSDP021: FSDP2 applied to the root module only (no submodule sharded)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, key_of, shard_kind

CODE = "FSDP021"
PITFALL = "fully-shard-root-only"
SEVERITY = "warning"
SUMMARY = "FSDP2 applied to the root module only"

_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict", "Transformer"}


def fix(version: tuple[int, int]) -> str:
    where = versions.fsdp2_module(version) or "torch.distributed._composable.fsdp (torch>=2.4)"
    return (
        f"call fully_shard (from {where}) on each transformer block (or other large "
        "submodule) first, then on the root"
    )


_MOVES = {"to", "cuda", "cpu", "half", "bfloat16", "float", "to_empty"}


def _unmoved(value: ast.expr | None) -> ast.expr | None:
    """``nn.Linear(8, 4).to(device)`` -> ``nn.Linear(8, 4)``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _MOVES
    ):
        value = value.func.value
    return value


def _single_layer(m: FileModel, key: str, call) -> bool:
    """True if the module is certainly one torch.nn layer (nothing to split)."""
    bound = m.values_of(key, call.func)
    if not bound:
        return False
    for a in bound:
        value = _unmoved(a.value)
        name = m.call_name(value) if isinstance(value, ast.Call) else None
        if not name or not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1] in _CONTAINERS:
            return False
    return True


def _one_part(m: FileModel, key: str, call) -> bool:
    """True if the module is an instance of a class of this file with at most one submodule
    and no container: there is nothing to shard separately."""
    bound = m.values_of(key, call.func)
    value = _unmoved(bound[0].value) if len(bound) == 1 else None
    if not isinstance(value, ast.Call):
        return False
    ctor = value.func
    cls = m.classes.get(ctor.id) if isinstance(ctor, ast.Name) else None
    init = cls.methods.get("__init__") if cls is not None else None
    if init is None:
        return False
    parts = 0
    for node in ast.walk(init.node):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = m.qualname(node.value.func) or ""
            local = isinstance(node.value.func, ast.Name) and node.value.func.id in m.classes
            if name.rsplit(".", 1)[-1] in _CONTAINERS:
                return False
            if name.startswith("torch.nn") or local:
                parts += 1
    return parts <= 1


def _handed_elsewhere(m: FileModel, key: str, call) -> bool:
    """True if the module goes to code that may shard its parts (a helper, another package)."""
    for other in call.func.calls:
        if other is call:
            continue
        name = other.name or ""
        if name.startswith("torch.") and shard_kind(name) is None:
            if name.rsplit(".", 1)[-1] != "parallelize_module":
                continue  # tensor parallelism splits the layers already: not root-only
        args = [*other.node.args, *(k.value for k in other.node.keywords)]
        if any(key_of(a) == key for a in args):
            return True
    return False


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard"):
        return
    shards = m.calls_to("fully_shard", module="torch.distributed")
    shards = [c for c in shards if shard_kind(m.call_name(c)) == "fsdp2"]
    if len(shards) != 1:
        return
    call = shards[0]
    if call.loop:
        return
    target = call_arg(call.node, 0, "module")
    key = key_of(target)
    if key is None or "[" in key or (key.count(".") > (1 if key.startswith("self.") else 0)):
        return
    func = call.func
    if not m.values_of(key, func):
        return  # a module of unknown origin (maybe one block of a model built elsewhere)
    if not func.is_module:
        if key in func.params:
            return  # a helper: it may be called once per submodule
        uses = [c for c in m.calls if m.local_callee(c) is func]
        if any(c.loop for c in uses) or len(uses) > 1:
            return
    if _single_layer(m, key, call) or _one_part(m, key, call) or _handed_elsewhere(m, key, call):
        return
    yield (
        call.node,
        (
            f"fully_shard(`{key}`) is the only sharding call: the whole model is one unit, "
            "gathered in one all-gather, so no memory is saved over DDP"
        ),
    )
