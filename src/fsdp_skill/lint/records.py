"""What the walk records: functions, classes, rank-only branches, calls and bindings."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(eq=False)
class Func:
    """A function or method defined in the file."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None
    name: str
    params: list[str]
    cls: Class | None = None
    parent: Func | None = None
    locals: set[str] = field(default_factory=set)
    returns: list[ast.expr] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    @property
    def is_module(self) -> bool:
        return self.node is None


@dataclass(eq=False)
class Class:
    """A class defined in the file."""

    node: ast.ClassDef
    name: str
    bases: list[ast.expr]
    methods: dict[str, Func] = field(default_factory=dict)


@dataclass(frozen=True)
class Branch:
    """A rank-only branch: the ``if`` whose test depends on the rank, and which arm."""

    node: ast.If
    orelse: bool
    after_exit: bool = False
    """The code after ``if <rank test>: return`` (it runs on the other ranks only)."""


@dataclass(eq=False, slots=True)
class Call:
    """One call site with its context."""

    node: ast.Call
    func: Func
    order: int
    branch: Branch | None
    loop: int
    withs: tuple[ast.Call, ...]
    name: str | None = None
    """The imported name it invokes (``torch.distributed.barrier``), set after the walk."""

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass(eq=False, slots=True)
class Assign:
    """One binding ``key = value`` (also ``for key in value`` and ``with value as key``)."""

    key: str
    value: ast.expr | None
    func: Func
    order: int
    branch: Branch | None
    loop: bool
    withs: tuple[ast.Call, ...]
    node: ast.AST
    owner: object = None
    """The function, class or module the bound name belongs to."""
    unpacked: tuple[ast.expr, int] | None = None
    """For ``a, b = helper()``: the unpacked value (``helper()``) and this name's position."""
