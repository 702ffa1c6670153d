"""FSDP015: a model built on the meta device never materialised (to_empty plus init)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant, is_inside, key_of, last_name
from fsdp_skill.lint.records import Assign
from fsdp_skill.lint.rules._api import kwarg_is, last

CODE = "FSDP015"
PITFALL = "meta-device-model-not-materialized"
SEVERITY = "error"
SUMMARY = "meta-device model never materialised"

_INIT_WORDS = (
    "init",
    "reset_parameters",
    "load",
    "apply",
    "set_model_state_dict",
    "set_state_dict",
)
_NOT_INIT = {"init_process_group", "init_device_mesh", "__init__"}


def fix(version: tuple[int, int]) -> str:
    return (
        'after sharding call model.to_empty(device="cuda") and then initialise the '
        "parameters (model.reset_parameters() / your init_weights, or load a checkpoint)"
    )


def _is_meta(m: FileModel, expr: ast.AST | None) -> bool:
    if constant(expr) == "meta":
        return True
    if isinstance(expr, ast.Call) and last(m.qualname(expr.func)) == "device":
        return constant(call_arg(expr, 0, "type")) == "meta"
    return False


def _meta_models(m: FileModel) -> Iterator[Assign]:
    """Bindings of a module constructed on the meta device."""
    for records in m.assigns.values():
        for a in records:
            value = a.value
            if not isinstance(value, ast.Call) or a.loop:
                continue
            in_meta = any(
                _is_meta(m, w) or last(m.qualname(w.func)) == "init_empty_weights" for w in a.withs
            )
            on_meta = _is_meta(m, call_arg(value, -1, "device"))
            moved = (
                isinstance(value.func, ast.Attribute)
                and value.func.attr == "to"
                and (_is_meta(m, call_arg(value, 0, "device")))
            )
            if _is_tensor_factory(m, value):
                continue
            if on_meta or moved or (in_meta and _constructs_module(m, value)):
                yield a


_FACTORIES = {"from_config", "_from_config", "from_pretrained"}


def _constructs_module(m: FileModel, call: ast.Call) -> bool:
    """True if a call under ``with torch.device("meta")`` builds a module: a class (``GPT(cfg)``,
    ``nn.Linear(...)``) or a model factory (``AutoModel.from_config``). A plain function call
    there (``measure_flops(meta_model, ...)``) computes something from a meta model instead."""
    name = last_name(call.func) or ""
    return name[:1].isupper() or name in _FACTORIES


def _is_tensor_factory(m: FileModel, call: ast.Call) -> bool:
    name = m.qualname(call.func) or ""
    return name.startswith("torch.") and not name.startswith("torch.nn")


def _materialisation(m: FileModel) -> str | None:
    """How the file gives meta modules real storage: "to_empty", "fsdp1", "assign" or None."""
    how = None
    for call in m.calls:
        func = call.node.func
        if isinstance(func, ast.Attribute) and func.attr == "to_empty":
            how = how or "to_empty"
        elif isinstance(func, ast.Attribute) and func.attr == "load_state_dict":
            if kwarg_is(call.node, "assign", True):
                return "assign"
        elif last(m.call_name(call)) == "FullyShardedDataParallel":
            return "fsdp1"  # FSDP1 materialises meta modules (reset_parameters/param_init_fn)
    return how


_MODULE_METHODS = {
    "parameters",
    "named_parameters",
    "train",
    "eval",
    "to",
    "cuda",
    "forward",
    "state_dict",
    "load_state_dict",
    "modules",
    "named_modules",
    "children",
    "apply",
    "to_empty",
    "requires_grad_",
}


def _key_uses(m: FileModel, func) -> tuple[set[str], set[str]]:
    """(keys handed to code this file cannot see, keys used as a module) in ``func``, computed
    once per function: a key escapes as an argument of a call that is neither torch's nor
    defined here; it is used as a module when called, asked for ``.parameters()`` and the
    like, or handed to a torch call (``fully_shard(model)``)."""
    memo = ("key-uses", id(func))
    if memo not in m.memo:
        escaped: set[str] = set()
        used: set[str] = set()
        for call in func.calls:
            node = call.node
            callee = key_of(node.func)
            if callee:
                used.add(callee)
            if isinstance(node.func, ast.Attribute) and node.func.attr in _MODULE_METHODS:
                receiver = key_of(node.func.value)
                if receiver:
                    used.add(receiver)
            keys = {key_of(arg) for arg in [*node.args, *(k.value for k in node.keywords)]}
            keys.discard(None)
            name = m.call_name(call)
            if name and name.startswith("torch."):
                used |= keys
            elif m.local_callee(call) is None:
                escaped |= keys
        m.memo[memo] = (escaped, used)
    return m.memo[memo]


def _escapes(m: FileModel, a: Assign) -> bool:
    """True if the model leaves this file's view (returned, or handed to unknown code)."""
    for ret in a.func.returns:
        if key_of(ret) and is_inside(key_of(ret), a.key):
            return True
    return a.key in _key_uses(m, a.func)[0]


def _initialised(m: FileModel) -> bool:
    for call in m.calls:
        func = call.node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _NOT_INIT:
            continue
        if any(word in name for word in _INIT_WORDS):
            return True
    return False


def _returns_meta_model(m: FileModel, func) -> bool:
    """True if ``func`` returns a module it builds on the meta device and does not give
    storage itself (``to_empty``, ``load_state_dict(assign=True)``); cached per function."""
    key = ("returns-meta", id(func))
    if key not in m.memo:
        built = {a.key for a in _meta_models(m) if a.func is func} if _mentions_meta(m) else set()
        built -= _materialised_in(m, func)
        m.memo[key] = any(key_of(r) in built for r in func.returns if key_of(r))
    return m.memo[key]


def _materialised_in(m: FileModel, func) -> set[str]:
    """Keys that ``func`` gives real storage: ``key.to_empty(...)``, or
    ``key.load_state_dict(..., assign=True)``."""
    out = set()
    for call in func.calls:
        f = call.node.func
        if not isinstance(f, ast.Attribute) or not key_of(f.value):
            continue
        if f.attr == "to_empty" or (
            f.attr == "load_state_dict" and kwarg_is(call.node, "assign", True)
        ):
            out.add(key_of(f.value))
    return out


def _mentions_meta(m: FileModel) -> bool:
    return m.uses("init_empty_weights") or any(s.value == "meta" for s in m.strings)


def _from_helpers(m: FileModel, kept: bool) -> Iterator[Assign]:
    """``model = build_model(cfg)`` where the helper (another module of the project, or this
    file) builds the model on the meta device and returns it. ``kept``: only models that stay
    in this file's view (the others cannot be reported, so their helpers are not looked up)."""
    for call in m.calls:
        if call.name is not None and call.name.startswith("torch."):
            continue
        bound = [
            a
            for a in m.bound_to(call.node)
            if not a.loop
            and a.key in _key_uses(m, a.func)[1]  # used as a module: a model, not a config
            and not (kept and _escapes(m, a))
        ]
        if not bound:
            continue  # (checked first: finding the helper may mean parsing another module)
        sites = m.project.callees(m, call)
        if sites and any(_returns_meta_model(owner, func) for owner, func in sites):
            yield from bound


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    how = _materialisation(m)
    if how in ("fsdp1", "assign") or (how == "to_empty" and _initialised(m)):
        return  # whatever is built on meta gets real storage here
    models = list(_meta_models(m)) if _mentions_meta(m) else []
    if how is None:
        models = [a for a in models if not _escapes(m, a)] + list(_from_helpers(m, kept=True))
        for a in models:
            yield (
                a.node,
                (
                    f"`{a.key}` is built on the meta device and never materialised: its "
                    "parameters have no storage (call to_empty, then initialise)"
                ),
            )
        return
    if not models and next(_from_helpers(m, kept=False), None) is None:
        return
    empty = next(
        c
        for c in m.calls
        if isinstance(c.node.func, ast.Attribute) and c.node.func.attr == "to_empty"
    )
    yield (
        empty.node,
        (
            "to_empty allocates uninitialised memory, and no parameter init follows "
            "(reset_parameters, init_weights or a checkpoint load): training starts from garbage"
        ),
    )
