"""FSDP018: FSDP2 module's forward (or another method using its parameters) called directly."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant, key_of
from fsdp_skill.lint.records import Class, Func

CODE = "FSDP018"
PITFALL = "fsdp2-method-bypasses-forward-hooks"
SEVERITY = "error"
SUMMARY = "FSDP2 module method called without the pre-forward all-gather"


def fix(version: tuple[int, int]) -> str:
    where = versions.fsdp2_module(version) or "torch.distributed._composable.fsdp"
    return (
        "call the module itself (model(x)) instead of model.forward(x); for another method, "
        f'register it once with register_fsdp_forward_method(model, "name") from {where}'
    )


def _registered(m: FileModel) -> set[str] | None:
    """Method names passed to ``register_fsdp_forward_method`` (None: a name is computed, so
    any method may be registered)."""
    out: set[str] = set()
    for call in m.calls_to("register_fsdp_forward_method", module="torch.distributed"):
        args = call.node.args
        name = (
            constant(args[1]) if len(args) >= 2 else constant(call_arg(call.node, 1, "method_name"))
        )
        if not isinstance(name, str):
            return None
        out.add(name)
    return out


def _module_attrs(m: FileModel) -> dict[int, set[str]]:
    """``{id(class): names}`` of ``self.x`` attributes assigned an nn.Module, a Parameter or an
    instance of a class defined in the file."""
    out: dict[int, set[str]] = {}
    for key, records in m.assigns.items():
        if not key.startswith("self.") or key.count(".") != 1:
            continue
        for a in records:
            if not isinstance(a.value, ast.Call) or not isinstance(a.owner, Class):
                continue
            name = m.qualname(a.value.func) or ""
            local = isinstance(a.value.func, ast.Name) and a.value.func.id in m.classes
            if name.startswith("torch.nn") or local:
                out.setdefault(id(a.owner), set()).add(key.split(".", 1)[1])
    return out


def _uses_parameters(method: Func, attrs: set[str]) -> bool:
    for node in ast.walk(method.node):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and (node.attr in attrs or node.attr == "forward")
        ):
            return True
    return False


def _class_of(m: FileModel, key: str, func: Func) -> Class | None:
    for a in m.values_of(key, func):
        if isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name):
            cls = m.classes.get(a.value.func.id)
            if cls is not None:
                return cls
    return None


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    if not m.uses("fully_shard"):
        return
    sharded = m.sharded_keys("fsdp2")
    if not sharded:
        return
    registered = _registered(m)
    module_attrs = None
    uses: dict[int, bool] = {}
    for call in m.calls:
        func = call.node.func
        if func.__class__ is not ast.Attribute or call.name is not None:
            continue
        key = key_of(func.value)
        if key == "self" or key not in sharded or m.shard_kinds(key, call.func) != {"fsdp2"}:
            continue  # a module calling its own methods does so from inside its forward
        if registered is None or func.attr in registered:
            continue
        if func.attr == "forward":
            yield (
                call.node,
                (
                    f"`{key}.forward(...)` bypasses the FSDP2 hooks: parameters stay sharded "
                    f"(call `{key}(...)`)"
                ),
            )
            continue
        cls = _class_of(m, key, call.func)
        method = cls.methods.get(func.attr) if cls else None
        if method is None or method.node is None or func.attr.startswith("__"):
            continue
        if id(method) not in uses:
            if module_attrs is None:
                module_attrs = _module_attrs(m)
            uses[id(method)] = _uses_parameters(method, module_attrs.get(id(cls), set()))
        if uses[id(method)]:
            yield (
                call.node,
                (
                    f"`{key}.{func.attr}(...)` uses the module's parameters outside forward: "
                    "FSDP2 never all-gathers them for it"
                ),
            )
