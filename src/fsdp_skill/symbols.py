"""Find the torch names a text or a code block uses, and check them against the installed torch.

Names are collected without importing torch; only ``resolve`` imports it, lazily.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from functools import cache

_TEXT_NAME = re.compile(r"(?<![\w./])torch(?:\.[A-Za-z_]\w*)+")  # "/torch.x" is a URL path


def names_in_text(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line, dotted name)`` for every ``torch.x.y`` written in prose or inline code."""
    for number, line in enumerate(text.split("\n"), start=1):
        for match in _TEXT_NAME.finditer(line):
            yield number, match.group(0).rstrip(".")


def names_in_code(code: str, roots: tuple[str, ...] = ("torch",)) -> Iterator[tuple[int, str]]:
    """Yield ``(line, dotted name)`` for every name of the ``roots`` packages (torch by
    default) that a Python block imports or uses.

    Follows ``import torch.distributed as dist`` and ``from torch.x import y as z`` so that
    ``dist.all_reduce`` is reported as ``torch.distributed.all_reduce``.
    Raises SyntaxError if the code does not parse.
    """
    tree = ast.parse(code)
    aliases: dict[str, str] = {}

    def ours(module: str) -> bool:
        return module.split(".", 1)[0] in roots

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    yield node.lineno, alias.name
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".", 1)[0]
                        aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if ours(node.module):
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    full = f"{node.module}.{alias.name}"
                    yield node.lineno, full
                    aliases[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain = _attribute_chain(node)
            if chain and chain[0] in aliases and len(chain) > 1:
                yield node.lineno, ".".join([aliases[chain[0]], *chain[1:]])


def _attribute_chain(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def longest_names(names: Iterator[tuple[int, str]]) -> list[tuple[int, str]]:
    """Drop names that are a prefix of another name found on the same line."""
    found = sorted(set(names))
    return [
        (line, name)
        for line, name in found
        if not any(o_line == line and o.startswith(name + ".") for o_line, o in found)
    ]


_MISSING = object()


@cache
def lookup(dotted: str) -> object:
    """The module or attribute ``dotted`` names in an installed package, else ``_MISSING``."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            continue
        except Exception:  # a module that fails to import for other reasons does not resolve
            return _MISSING
        for attr in parts[split:]:
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                return _MISSING
        return obj
    return _MISSING


def resolve(dotted: str) -> bool:
    """True if ``dotted`` names a module or attribute of an installed package (torch, ...)."""
    return lookup(dotted) is not _MISSING


def deprecation(dotted: str) -> str | None:
    """The message with which the installed package deprecates ``dotted`` (PEP 702's
    ``__deprecated__``, which torch's ``@deprecated`` sets), or None."""
    message = getattr(lookup(dotted), "__deprecated__", None)
    return message if isinstance(message, str) else None


def torch_version() -> str | None:
    """The installed torch version (``2.13.0``), or None when torch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__.split("+")[0]
