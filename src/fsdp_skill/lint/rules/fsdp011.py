"""FSDP011: FSDP1 wrap of a whole model with no auto_wrap_policy and no nested wrapping."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.nodes import call_arg, constant, key_of, last_name
from fsdp_skill.lint.records import Call

CODE = "FSDP011"
PITFALL = "fsdp1-no-auto-wrap-policy"
SEVERITY = "warning"
SUMMARY = "FSDP1 wraps the whole model as one unit"


def fix(version: tuple[int, int]) -> str:
    return (
        "pass auto_wrap_policy=ModuleWrapPolicy({YourBlock}) (or "
        "functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={YourBlock}))"
    )


_CONTAINERS = {
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
}


def _single_layer(m: FileModel, module: ast.expr | None, call: Call) -> bool:
    """True if the wrapped module is certainly one torch.nn layer (``nn.Linear(...)``)."""
    values = m.resolve(module, call.func) if module is not None else []
    if not values:
        return False
    for value in values:
        name = m.call_name(value) if isinstance(value, ast.Call) else None
        if not name or not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1] in _CONTAINERS:
            return False
    return True


def _keywords(m: FileModel, call: Call) -> dict[str, ast.expr] | None:
    """The keyword arguments of the call, with ``**name`` expanded when ``name`` is bound once
    to a literal dict (``{"auto_wrap_policy": ...}`` or ``dict(auto_wrap_policy=...)``);
    None when some arguments cannot be known (``*args``, an unresolved ``**kwargs``)."""
    node = call.node
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    out: dict[str, ast.expr] = {}
    for kw in node.keywords:
        if kw.arg is not None:
            out[kw.arg] = kw.value
            continue
        name = key_of(kw.value)
        if (
            name is None
            or m.assigns.get(f"{name}.[]")
            or m.assigns.get(f"{name}[]")
            or m.method_calls_on(name)
        ):
            return None  # filled in or updated elsewhere: its keys are not all known here
        values = m.resolve(kw.value, call.func)
        if len(values) != 1:
            return None
        literal = _literal_dict(values[0])
        if literal is None:
            return None
        out.update(literal)
    return out


def _literal_dict(expr: ast.expr) -> dict[str, ast.expr] | None:
    if isinstance(expr, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in expr.keys):
            return None  # ``{**other}`` or computed keys
        return {k.value: v for k, v in zip(expr.keys, expr.values, strict=True)}
    if isinstance(expr, ast.Call) and last_name(expr.func) == "dict" and not expr.args:
        if any(kw.arg is None for kw in expr.keywords):
            return None
        return {kw.arg: kw.value for kw in expr.keywords}
    return None


def check(m: FileModel) -> Iterator[tuple[ast.AST, str]]:
    wraps = m.calls_to("FullyShardedDataParallel", module="torch.distributed.fsdp")
    if len(wraps) != 1 or m.identifiers & {"enable_wrap", "wrap"}:
        return  # several wrap sites: nested wrapping by hand
    call = wraps[0]
    node = call.node
    if call.loop:
        return
    keywords = _keywords(m, call)
    if keywords is None:
        return  # ``**kwargs`` that cannot be resolved: the policy may be in there
    policy = keywords.get("auto_wrap_policy") or keywords.get("fsdp_auto_wrap_policy")
    if policy is not None and constant(policy) is not None:
        return
    func = call.func
    if not func.is_module:
        uses = [c for c in m.calls if m.local_callee(c) is func]
        if len(uses) > 1 or any(c.loop for c in uses):
            return  # a wrapping helper called per submodule
        if not uses and func.cls is None:
            return  # a helper for other modules: they may call it per submodule
    module = call_arg(node, 0, "module")
    if _single_layer(m, module, call):
        return  # one torch.nn layer: there is nothing a wrap policy could split
    label = key_of(module) or "the model"
    yield (
        node,
        (
            f"FullyShardedDataParallel(`{label}`) with no auto_wrap_policy: the whole model is "
            "one unit, so every rank gathers all parameters at once (no memory saving)"
        ),
    )
