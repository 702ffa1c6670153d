"""Small helpers over expressions and resolved names, shared by the file model and the rules."""

from __future__ import annotations

import ast

FSDP1_CLASS = "FullyShardedDataParallel"
SHARD_FUNCS = {"fully_shard"}
FOLLOW_DEPTH = 4
"""How many simple assignments the analyses follow back before giving up (and staying silent)."""


def key_of(expr: ast.AST | None) -> str | None:
    """The access path of ``expr``: ``model``, ``self.model``, ``model.layers[]``; else None."""
    parts: list[str] = []
    while True:
        if isinstance(expr, ast.Name):
            parts.append(expr.id)
            return ".".join(reversed(parts))
        if isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Subscript):
            parts.append("[]")
            expr = expr.value
        else:
            return None


def root_of(key: str) -> str:
    """``self.model.layers[]`` -> ``self.model``; ``model.layers`` -> ``model``."""
    parts = key.replace(".[]", "").replace("[]", "").split(".")
    if parts[0] == "self" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def is_inside(key: str, root: str) -> bool:
    """True if ``key`` names ``root`` itself or something reached from it."""
    return key == root or key.startswith(root + ".") or key.startswith(root + "[")


def constant(expr: ast.AST | None) -> object:
    """The value of a literal, or ``...`` (Ellipsis) when ``expr`` is not a constant."""
    if isinstance(expr, ast.Constant):
        return expr.value
    return ...


def call_arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    """The argument passed as keyword ``name`` or at position ``index`` (None if absent)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if index >= 0 and len(call.args) > index:
        arg = call.args[index]
        if not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return arg
    return None


def has_splat(call: ast.Call) -> bool:
    """True if the call passes ``*args`` or ``**kwargs`` (its arguments are unknown)."""
    return any(kw.arg is None for kw in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    )


def last_name(expr: ast.AST) -> str | None:
    """The final identifier of a Name/Attribute (``self.rank`` -> ``rank``)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def shard_kind(name: str | None) -> str | None:
    """``"fsdp2"`` for ``fully_shard``, ``"fsdp1"`` for ``FullyShardedDataParallel``."""
    if not name or not is_under(name, "torch.distributed"):
        return None
    last = name.rsplit(".", 1)[-1]
    if last in SHARD_FUNCS:
        return "fsdp2"
    if last == FSDP1_CLASS:
        return "fsdp1"
    return None


def is_under(name: str, module: str) -> bool:
    """True if dotted ``name`` lives in ``module`` (``torch.distributed.barrier`` is under
    ``torch`` and ``torch.distributed``)."""
    return name == module or name.startswith(module + ".")


def arms(root: ast.AST) -> dict[int, tuple[tuple[int, bool], ...]]:
    """``{id(node): ((id(if_node), in_else), ...)}``: the if/else arms each node under
    ``root`` sits in, outermost first (one walk; nested functions included)."""
    out: dict[int, tuple[tuple[int, bool], ...]] = {}
    stack: list[tuple[ast.AST, tuple[tuple[int, bool], ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        out[id(node)] = path
        if isinstance(node, ast.If):
            stack.append((node.test, path))
            stack += [(child, (*path, (id(node), False))) for child in node.body]
            stack += [(child, (*path, (id(node), True))) for child in node.orelse]
            continue
        stack += [(child, path) for child in ast.iter_child_nodes(node)]
    return out


def exclusive(paths: dict[int, tuple[tuple[int, bool], ...]], a: ast.AST, b: ast.AST) -> bool:
    """True if ``a`` and ``b`` sit in different arms of one ``if`` (never both run)."""
    seen = dict(paths.get(id(a), ()))
    return any(seen.get(if_id, arm) != arm for if_id, arm in paths.get(id(b), ()))
