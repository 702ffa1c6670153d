"""One pass over a module's AST that records what the rules need: names, calls, assignments.

The walk resolves imports (``import torch.distributed as dist``, ``from torch.distributed.fsdp
import fully_shard as shard``) to dotted names, and records every call and assignment with its
context: enclosing function, enclosing rank-only branch, loop depth, ``with`` items and a
statement order. After the walk, ``FileModel`` answers questions the rules ask ("is ``model``
sharded in this scope?", "which values were assigned to ``params``?") from those records,
following simple assignments and calls of functions defined in the same file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property

# --- small expression helpers ----------------------------------------------------------------


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


_RANK_WORD = re.compile(r"^(?:[a-z0-9]+_)*rank(?:_?id|_?idx|_?\d+)?$", re.IGNORECASE)
_NOT_PROCESS_RANK = re.compile(r"^(?:lora|low|max|min|matrix|tensor|svd|adapter|target)_", re.I)
"""Ranks that are not a process's rank (LoRA rank, matrix rank)."""
_RANK_ENV = {"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "SLURM_PROCID"}
_RANK_CALLS = {"get_rank", "get_local_rank", "get_node_local_rank", "get_global_rank"}
_RANK_FLAGS = {
    "is_main_process",
    "is_local_main_process",
    "is_main",
    "is_master",
    "is_local_master",
    "master_process",
    "main_process",
    "is_rank_zero",
    "is_rank0",
    "rank0",
    "rank_zero",
    "is_global_zero",
    "is_world_process_zero",
    "is_local_process_zero",
    "is_leader",
}


def last_name(expr: ast.AST) -> str | None:
    """The final identifier of a Name/Attribute (``self.rank`` -> ``rank``)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


# --- records -----------------------------------------------------------------------------------


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


# --- the walk ----------------------------------------------------------------------------------


class _Walker:
    """Visits every node once, keeping the context that records carry."""

    def __init__(self, model: FileModel) -> None:
        self.m = model
        self.func = model.module
        self.branch: Branch | None = None
        self.loop = 0
        self.withs: tuple[ast.Call, ...] = ()
        self.cls: Class | None = None

    def _order(self) -> int:
        m = self.m
        m._counter += 1
        return m._counter

    # dispatch: statements and expressions that change context; everything else is generic
    def visit(self, node: ast.AST) -> None:
        method = _DISPATCH.get(node.__class__)
        if method is not None:
            method(self, node)
            return
        # inlined ast.iter_child_nodes: this loop runs for most nodes of every file
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def skip(self, node: ast.AST) -> None:
        """Operators and load/store markers: nothing below them."""

    def visit_many(self, nodes: list) -> None:
        for node in nodes:
            self.visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.m.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.m.aliases[top] = top
            self.m.imports.append((node, alias.name))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            self.m.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            self.m.imports.append((node, f"{node.module}.{alias.name}"))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_many(node.decorator_list)
        self.visit_many(node.bases)
        cls = Class(node, node.name, list(node.bases))
        self.m.classes.setdefault(node.name, cls)
        saved = self.cls
        self.cls = cls
        self.visit_many(node.body)
        self.cls = saved

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.visit_many(node.decorator_list)
        args = node.args
        self.visit_many([d for d in args.defaults + args.kw_defaults if d is not None])
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        func = Func(node, node.name, params, cls=self.cls, parent=self.func)
        if self.cls is not None:
            self.cls.methods.setdefault(node.name, func)
        elif self.func.is_module:
            self.m.functions.setdefault(node.name, func)
        self.func.locals.add(node.name)
        self.m.all_functions.append(func)
        self._enter(func, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        func = Func(node, "<lambda>", params, parent=self.func)
        self.m.all_functions.append(func)
        self.m.lambdas[id(node)] = func
        self._enter(func, [node.body])

    def _enter(self, func: Func, body: list) -> None:
        saved = (self.func, self.branch, self.loop, self.withs, self.cls)
        self.func, self.branch, self.loop, self.withs = func, None, 0, ()
        self.cls = None
        self.visit_many(body)
        self.func, self.branch, self.loop, self.withs, self.cls = saved

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.func.returns.append(node.value)
            self.visit(node.value)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        rank = self.m.is_rank_test(node.test, self.func)
        saved = self.branch
        if rank:
            self.branch = Branch(node, False)
        self.visit_many(node.body)
        if rank:
            self.branch = Branch(node, True)
        self.visit_many(node.orelse)
        self.branch = saved

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind(node.target, node.iter, node, loop=True)
        self.loop += 1
        self.visit_many(node.body)
        self.loop -= 1
        self.visit_many(node.orelse)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self.loop += 1
        self.visit_many(node.body)
        self.loop -= 1
        self.visit_many(node.orelse)

    def visit_comprehension_owner(self, node: ast.AST) -> None:
        # comprehensions iterate: calls inside run once per item
        for gen in node.generators:
            self.visit(gen.iter)
            self._bind(gen.target, gen.iter, node, loop=True)
        self.loop += 1
        for gen in node.generators:
            self.visit_many(gen.ifs)
        for child in ("elt", "key", "value"):
            if hasattr(node, child):
                self.visit(getattr(node, child))
        self.loop -= 1

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        added = []
        for item in node.items:
            self.visit(item.context_expr)
            if isinstance(item.context_expr, ast.Call):
                added.append(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, item.context_expr, node, loop=False)
        saved = self.withs
        self.withs = saved + tuple(added)
        self.visit_many(node.body)
        self.withs = saved

    visit_AsyncWith = visit_With

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind(target, node.value, node, loop=False)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, node.value, node, loop=False)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self._bind(node.target, None, node, loop=False)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, node.value, node, loop=False)

    def _bind(self, target: ast.AST, value: ast.expr | None, node: ast.AST, loop: bool) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            values = (
                value.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                else [None] * len(target.elts)
            )
            for sub, sub_value in zip(target.elts, values, strict=True):
                # a loop target unpacks items of the iterable: keep the iterable as the source
                self._bind(sub, value if loop else sub_value, node, loop)
            return
        if isinstance(target, ast.Starred):
            self._bind(target.value, None, node, loop)
            return
        key = key_of(target)
        if key is None:
            self.visit(target)
            return
        if isinstance(target, ast.Subscript):
            self.visit(target.slice)
        owner = self.func
        if "." not in key and "[" not in key:
            owner.locals.add(key)
        record = Assign(key, value, owner, self._order(), self.branch, loop, self.withs, node)
        record.owner = self.m.scope_for(key, owner)
        self.m.assigns.setdefault(key, []).append(record)
        self.m._bindings.setdefault((id(record.owner), key), []).append(record)
        if value is not None:
            self.m._bound_to.setdefault(id(value), []).append(record)

    def visit_Global(self, node: ast.Global) -> None:
        self.m.globals_declared.update((id(self.func), n) for n in node.names)

    def visit_Call(self, node: ast.Call) -> None:
        self.visit(node.func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)
        record = Call(node, self.func, self._order(), self.branch, self.loop, self.withs)
        self.func.calls.append(record)
        self.m.calls.append(record)
        self.m.call_of[id(node)] = record

    def visit_Name(self, node: ast.Name) -> None:
        self.m.identifiers.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        identifiers = self.m.identifiers
        value: ast.AST = node
        while value.__class__ is ast.Attribute:  # a.b.c.d: no recursion per dot
            identifiers.add(value.attr)
            value = value.value
        if value.__class__ is ast.Name:
            identifiers.add(value.id)
        else:
            self.visit(value)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # a docstring or bare string: prose, not code
        self.visit(node.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 300:
            self.m.strings.append(node)


_DISPATCH = {
    ast.Import: _Walker.visit_Import,
    ast.ImportFrom: _Walker.visit_ImportFrom,
    ast.ClassDef: _Walker.visit_ClassDef,
    ast.FunctionDef: _Walker.visit_FunctionDef,
    ast.AsyncFunctionDef: _Walker.visit_AsyncFunctionDef,
    ast.Lambda: _Walker.visit_Lambda,
    ast.Return: _Walker.visit_Return,
    ast.If: _Walker.visit_If,
    ast.For: _Walker.visit_For,
    ast.AsyncFor: _Walker.visit_AsyncFor,
    ast.While: _Walker.visit_While,
    ast.ListComp: _Walker.visit_comprehension_owner,
    ast.SetComp: _Walker.visit_comprehension_owner,
    ast.GeneratorExp: _Walker.visit_comprehension_owner,
    ast.DictComp: _Walker.visit_comprehension_owner,
    ast.With: _Walker.visit_With,
    ast.AsyncWith: _Walker.visit_AsyncWith,
    ast.Assign: _Walker.visit_Assign,
    ast.AnnAssign: _Walker.visit_AnnAssign,
    ast.AugAssign: _Walker.visit_AugAssign,
    ast.NamedExpr: _Walker.visit_NamedExpr,
    ast.Global: _Walker.visit_Global,
    ast.Call: _Walker.visit_Call,
    ast.Name: _Walker.visit_Name,
    ast.Attribute: _Walker.visit_Attribute,
    ast.Expr: _Walker.visit_Expr,
    ast.Constant: _Walker.visit_Constant,
    ast.JoinedStr: _Walker.skip,  # f-strings: formatted output, nothing the rules look at
}
for _leaf in (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop):
    for _cls in _leaf.__subclasses__():
        _DISPATCH[_cls] = _Walker.skip


# --- the model the rules query ----------------------------------------------------------------

FSDP1_CLASS = "FullyShardedDataParallel"
SHARD_FUNCS = {"fully_shard"}
_FOLLOW_DEPTH = 4
_ITERATORS = {"enumerate", "zip", "list", "tuple", "reversed", "sorted", "iter"}


class FileModel:
    """Everything the rules know about one module, built by one walk of its AST."""

    def __init__(self, tree: ast.Module, lines: list[str] | None = None) -> None:
        self.tree = tree
        self.lines = lines or []
        self.module = Func(None, "<module>", [])
        self.aliases: dict[str, str] = {}
        self.imports: list[tuple[ast.AST, str]] = []
        self.classes: dict[str, Class] = {}
        self.functions: dict[str, Func] = {}
        self.all_functions: list[Func] = [self.module]
        self.lambdas: dict[int, Func] = {}
        self.calls: list[Call] = []
        self.call_of: dict[int, Call] = {}
        self.assigns: dict[str, list[Assign]] = {}
        self.identifiers: set[str] = set()
        self.strings: list[ast.Constant] = []
        self.globals_declared: set[tuple[int, str]] = set()
        self._counter = 0
        self._callee_cache: dict[int, Func | None] = {}
        self.memo: dict[object, object] = {}
        """Results that several rules derive from this file (computed once per file)."""
        self._bindings: dict[tuple[int, str], list[Assign]] = {}
        self._bound_to: dict[int, list[Assign]] = {}
        self._module_alias: dict[str, str | None] = {}
        self._scope_cache: dict[tuple[int, str], object] = {}
        self._origin_cache: dict[tuple[int, str], set[str]] = {}
        self._walking = True
        _Walker(self).visit_many(tree.body)
        self._walking = False
        qualname = self.qualname
        for call in self.calls:  # resolved after the walk: every import is known by now
            call.name = qualname(call.node.func)

    def release(self) -> None:
        """Break the reference cycles (function <-> its calls, class <-> its methods) so that
        the tree is freed at once instead of waiting for the cyclic garbage collector, which
        would otherwise run often and slowly while many files are linted."""
        for func in self.all_functions:
            func.calls = []
            func.cls = None
            func.parent = None
        for cls in self.classes.values():
            cls.methods = {}
        self.memo.clear()
        self.__dict__.pop("_shard_analysis", None)

    # -- names ---------------------------------------------------------------------------------

    def qualname(self, expr: ast.AST | None, depth: int = 0) -> str | None:
        """The dotted name ``expr`` refers to through imports (``dist.barrier`` ->
        ``torch.distributed.barrier``), following module-level aliases like ``shard =
        fully_shard``; None when it is not an imported name."""
        if isinstance(expr, ast.Name):
            if expr.id in self.aliases:
                return self.aliases[expr.id]
            if depth >= 2:
                return None
            if not self._walking and expr.id in self._module_alias:
                return self._module_alias[expr.id]
            bound = self._bindings.get((id(self.module), expr.id), ())
            found = None
            if len(bound) == 1 and isinstance(bound[0].value, (ast.Name, ast.Attribute)):
                found = self.qualname(bound[0].value, depth + 1)
            if not self._walking:
                self._module_alias[expr.id] = found
            return found
        if isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value, depth)
            return f"{base}.{expr.attr}" if base else None
        return None

    def call_name(self, call: Call | ast.Call) -> str | None:
        """The imported name a call invokes (``torch.distributed.barrier``), or None."""
        if isinstance(call, Call):
            return call.name
        record = self.call_of.get(id(call))
        return record.name if record is not None else self.qualname(call.func)

    @cached_property
    def _calls_by_last(self) -> dict[str, list[tuple[str, Call]]]:
        index: dict[str, list[tuple[str, Call]]] = {}
        for call in self.calls:
            name = self.call_name(call)
            if name:
                index.setdefault(name.rsplit(".", 1)[-1], []).append((name, call))
        return index

    def calls_to(self, *lasts: str, module: str = "torch") -> list[Call]:
        """Calls of imported names under ``module`` whose last part is in ``lasts``."""
        out = []
        for last in lasts:
            out += [c for name, c in self._calls_by_last.get(last, ()) if is_under(name, module)]
        if len(lasts) > 1:
            out.sort(key=lambda c: c.order)
        return out

    def imported_classes(self, module: str) -> list[str]:
        """Last parts of the capitalised names this file calls from ``module``."""
        key = ("imported_classes", module)
        if key not in self.memo:
            self.memo[key] = [
                last
                for last, calls in self._calls_by_last.items()
                if last[:1].isupper() and any(is_under(name, module) for name, _ in calls)
            ]
        return self.memo[key]

    def uses(self, *lasts: str) -> bool:
        """True if the file imports or mentions any of these names (a cheap pre-check)."""
        return bool(self.identifiers.intersection(lasts)) or any(
            name.rsplit(".", 1)[-1] in lasts for name in self.aliases.values()
        )

    @cached_property
    def local_calls(self) -> list[tuple[Call, Func]]:
        """Every call of a function defined in this file, with that function."""
        out = []
        cache = self._callee_cache
        local_names = self.functions.keys() | self.classes.keys()
        for call in self.calls:
            f = call.node.func
            if f.__class__ is ast.Name:
                if f.id not in local_names:
                    cache[id(call)] = None
                    continue
            elif not (f.__class__ is ast.Attribute and f.value.__class__ is ast.Name):
                cache[id(call)] = None
                continue
            callee = self.local_callee(call)
            if callee is not None:
                out.append((call, callee))
        return out

    def method_calls(self, attr: str) -> list[Call]:
        """Calls ``<something>.attr(...)`` whose receiver is not an imported module."""
        return [
            call
            for call in self.calls
            if call.name is None
            and call.node.func.__class__ is ast.Attribute
            and call.node.func.attr == attr
        ]

    # -- scopes and values ------------------------------------------------------------------------

    def scope_for(self, key: str, func: Func) -> object:
        """The owner of ``key`` seen from ``func``: the class for ``self.x``, the defining
        function for a local name, else the module."""
        root = key.split(".", 1)[0].split("[", 1)[0]
        if self._walking:
            return self._find_scope(root, func)
        cache_key = (id(func), root)
        found = self._scope_cache.get(cache_key)
        if found is None:
            found = self._scope_cache[cache_key] = self._find_scope(root, func)
        return found

    def _find_scope(self, root: str, func: Func) -> object:
        if root == "self" and func.cls is None:
            scope = func
            while scope is not None and scope.cls is None:
                scope = scope.parent
            if scope is not None:
                return scope.cls
        if root == "self" and func.cls is not None:
            return func.cls
        scope: Func | None = func
        while scope is not None and not scope.is_module:
            if (id(scope), root) in self.globals_declared:
                return self.module
            if root in scope.locals or root in scope.params:
                return scope
            scope = scope.parent
        return self.module

    def owner_of(self, assign: Assign) -> object:
        return assign.owner

    def values_of(self, key: str, func: Func) -> list[Assign]:
        """Bindings of ``key`` that are visible from ``func`` (same owner)."""
        return self._bindings.get((id(self.scope_for(key, func)), key), [])

    def bound_to(self, value: ast.AST) -> list[Assign]:
        """The bindings whose value is exactly this expression (``x = <value>``)."""
        return self._bound_to.get(id(value), [])

    def resolve(self, expr: ast.expr | None, func: Func, depth: int = 0) -> list[ast.expr]:
        """The expressions ``expr`` may stand for, following simple assignments.

        A name bound once resolves to its value (recursively); a name bound several times or
        by a loop, or a parameter, resolves to itself (unknown)."""
        if expr is None:
            return []
        key = key_of(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
        if key is None or depth >= _FOLLOW_DEPTH:
            return [expr]
        bound = self.values_of(key, func)
        if not bound or any(a.loop or a.value is None for a in bound):
            return [expr]
        out: list[ast.expr] = []
        for a in bound:
            out.extend(self.resolve(a.value, a.func, depth + 1))
        return out

    # -- local functions ----------------------------------------------------------------------------

    def local_callee(self, call: Call) -> Func | None:
        """The function defined in this file that ``call`` runs, if known (also a class's
        ``__init__`` for ``Cls(...)`` and ``self.method(...)`` inside the class)."""
        key = id(call)
        if key in self._callee_cache:
            return self._callee_cache[key]
        found = self._find_callee(call)
        self._callee_cache[key] = found
        return found

    def _find_callee(self, call: Call) -> Func | None:
        f = call.node.func
        if isinstance(f, ast.Name):
            if f.id in self.aliases:
                return None
            if f.id in self.functions:
                return self.functions[f.id]
            cls = self.classes.get(f.id)
            if cls is not None:
                return cls.methods.get("__init__")
            return None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            cls = call.func.cls or self._enclosing_class(call.func)
            if cls is not None:
                return cls.methods.get(f.attr)
        return None

    def _enclosing_class(self, func: Func) -> Class | None:
        scope: Func | None = func
        while scope is not None:
            if scope.cls is not None:
                return scope.cls
            scope = scope.parent
        return None

    def function_ref(self, expr: ast.expr | None, func: Func) -> Func | None:
        """The local function an expression refers to (``train``, ``self.run``, a lambda)."""
        if isinstance(expr, ast.Lambda):
            return self.lambdas.get(id(expr))
        if isinstance(expr, ast.Name) and expr.id not in self.aliases:
            return self.functions.get(expr.id)
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
        ):
            cls = self._enclosing_class(func)
            return cls.methods.get(expr.attr) if cls else None
        return None

    def bound_args(self, call: Call, callee: Func) -> list[tuple[str, ast.expr]]:
        """Pairs (parameter name, argument expression) for a call of a local function."""
        params = list(callee.params)
        node = call.node
        if callee.cls is not None and params and params[0] in ("self", "cls"):
            if not (isinstance(node.func, ast.Name) and callee.name != "__init__"):
                params = params[1:]
        pairs = []
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(params):
                pairs.append((params[i], arg))
        for kw in node.keywords:
            if kw.arg and kw.arg in callee.params:
                pairs.append((kw.arg, kw.value))
        return pairs

    def transitive(self, direct: set[int]) -> set[int]:
        """Ids of functions that reach one of ``direct`` (function ids) through local calls."""
        reached = set(direct)
        if not reached:
            return reached
        changed = True
        rounds = 0
        while changed and rounds < 8:
            changed = False
            rounds += 1
            for call, callee in self.local_calls:
                if id(callee) in reached and id(call.func) not in reached:
                    reached.add(id(call.func))
                    changed = True
        return reached

    def is_referenced(self, func: Func) -> bool:
        """True if the function's name is used anywhere (called, passed, registered)."""
        return func.name in self.identifiers

    # -- rank conditions ---------------------------------------------------------------------------

    def is_rank_expr(self, expr: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if ``expr`` evaluates to this process's rank (or a function of it)."""
        if isinstance(expr, (ast.Name, ast.Attribute)):
            name = last_name(expr)
            if (
                name
                and _RANK_WORD.match(name)
                and not _NOT_PROCESS_RANK.match(name)
                and self.qualname(expr) is None
            ):
                return True
            if isinstance(expr, ast.Name) and depth < 2:
                return any(
                    a.value is not None and self.is_rank_expr(a.value, a.func, depth + 1)
                    for a in self.values_of(expr.id, func)
                )
            return False
        if isinstance(expr, ast.Call):
            name = last_name(expr.func)
            if name in _RANK_CALLS:
                return True
            if name in ("int", "str") and expr.args:
                return self.is_rank_expr(expr.args[0], func, depth)
            if name in ("get", "getenv") and expr.args:
                return constant(expr.args[0]) in _RANK_ENV
            return False
        if isinstance(expr, ast.Subscript):
            return constant(expr.slice) in _RANK_ENV
        if isinstance(expr, ast.BinOp):
            return self.is_rank_expr(expr.left, func, depth) or self.is_rank_expr(
                expr.right, func, depth
            )
        return False

    def is_rank_test(self, test: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if an ``if`` test selects some ranks only (``rank == 0``, ``is_main_process``)."""
        if isinstance(test, ast.Compare):
            return any(self.is_rank_expr(e, func) for e in [test.left, *test.comparators])
        if isinstance(test, ast.BoolOp):
            return any(self.is_rank_test(v, func, depth) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.is_rank_test(test.operand, func, depth)
        if isinstance(test, ast.Call):
            name = last_name(test.func)
            return name in _RANK_FLAGS
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = last_name(test)
            if name and name.lower() in _RANK_FLAGS:
                return True
            if isinstance(test, ast.Name) and depth < 2:
                return any(
                    a.value is not None and self.is_rank_test(a.value, a.func, depth + 1)
                    for a in self.values_of(test.id, func)
                )
            if isinstance(test, ast.Name) or isinstance(test, ast.Attribute):
                return self.is_rank_expr(test, func)
        return False

    def mentions_rank(self, expr: ast.AST, func: Func, depth: int = 0) -> bool:
        """True if anything inside ``expr`` (following simple assignments) depends on the rank."""
        for node in ast.walk(expr):
            if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                if self.is_rank_expr(node, func):
                    return True
            if isinstance(node, ast.IfExp) and self.is_rank_test(node.test, func):
                return True
            if isinstance(node, ast.Name) and depth < _FOLLOW_DEPTH:
                for a in self.values_of(node.id, func):
                    if a.branch is not None:
                        return True
                    if a.value is not None and a.value is not expr:
                        if self.mentions_rank(a.value, a.func, depth + 1):
                            return True
        return False

    # -- kinds of values: sharded modules, optimizers ------------------------------------------

    @cached_property
    def _shard_analysis(self) -> tuple[dict, dict, dict]:
        """Which modules are sharded, and which function parameters get sharded inside.

        FSDP2: a key passed to ``fully_shard``. FSDP1: a key bound to
        ``FullyShardedDataParallel(...)``. Follows assignments (``b = a``), arguments of local
        functions and their return values. Returns ``(kinds, shards, shards_inside)``:
        ``{(id(owner), key): {"fsdp1"|"fsdp2"}}``, ``{id(func): params it shards or wraps}``
        and ``{id(func): params whose submodules it shards}``."""
        kinds: dict[tuple[int, str], set[str]] = {}
        shards: dict[int, set[str]] = {}
        inside: dict[int, set[str]] = {}
        returns_kind: dict[int, set[str]] = {}

        kinded: set[str] = set()  # keys with a kind in some scope: a cheap first test

        def add(owner: object, key: str, kind: str) -> bool:
            slot = kinds.setdefault((id(owner), key), set())
            if kind in slot:
                return False
            slot.add(kind)
            kinded.add(key)
            return True

        def mark_param(func: Func, key: str, table: dict[int, set[str]]) -> bool:
            if key not in func.params or key in table.get(id(func), ()):
                return False
            table.setdefault(id(func), set()).add(key)
            return True

        def kinds_of(expr: ast.expr | None, func: Func) -> set[str]:
            if isinstance(expr, ast.Call):
                kind = shard_kind(self.call_name(expr))
                if kind == "fsdp1":
                    return {"fsdp1"}
                if kind == "fsdp2":
                    return set(kinds_of(call_arg(expr, 0, "module"), func)) | {"fsdp2"}
                record = self.call_of.get(id(expr))
                callee = self.local_callee(record) if record else None
                if callee is not None and callee.name != "__init__":
                    return set(returns_kind.get(id(callee), ()))
                return set()
            key = key_of(expr)
            if key is None or key not in kinded:
                return set()
            return set(kinds.get((id(self.scope_for(key, func)), key), ()))

        relevant = [c for c in self.calls if shard_kind(self.call_name(c))]
        if not relevant:
            return kinds, shards, inside  # nothing is sharded in this file
        relevant += [c for c, _ in self.local_calls]
        carriers = {id(c.node) for c in relevant}
        flows = [
            a
            for records in self.assigns.values()
            for a in records
            if not a.loop
            and (
                isinstance(a.value, (ast.Name, ast.Attribute))
                or (isinstance(a.value, ast.Call) and id(a.value) in carriers)
            )
        ]
        relevant.sort(key=lambda c: c.order)
        for _ in range(5):
            changed = False
            for call in relevant:
                kind = shard_kind(self.call_name(call))
                targets: list[tuple[ast.expr, str]] = []
                if kind is not None:
                    arg = call_arg(call.node, 0, "module")
                    elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                    targets = [(e, kind) for e in elts if e is not None]
                else:
                    callee = self.local_callee(call)
                    if callee is None:
                        continue
                    for param, arg in self.bound_args(call, callee):
                        if param in shards.get(id(callee), ()):
                            targets.append((arg, "fsdp2"))
                        for k in kinds_of(arg, call.func):
                            changed |= add(callee, param, k)
                for target, k in targets:
                    key = key_of(target)
                    if key is None:
                        continue
                    owner = self.scope_for(key, call.func)
                    if k == "fsdp2":
                        changed |= add(owner, key, "fsdp2")
                    if owner is call.func:
                        changed |= mark_param(call.func, key, shards)
                    for origin in self.origins(key, call.func):
                        root = root_of(origin)
                        if origin != root and self.scope_for(root, call.func) is call.func:
                            changed |= mark_param(call.func, root, inside)
            for a in flows:
                for k in kinds_of(a.value, a.func):
                    changed |= add(self.owner_of(a), a.key, k)
            for func in self.all_functions:
                for ret in func.returns:
                    for k in kinds_of(ret, func):
                        if k not in returns_kind.setdefault(id(func), set()):
                            returns_kind[id(func)].add(k)
                            changed = True
            if not changed:
                break
        return kinds, shards, inside

    def shards_param(self, func: Func, param: str) -> bool:
        """True if calling ``func`` shards (FSDP2) or wraps (FSDP1) its parameter ``param``."""
        return param in self._shard_analysis[1].get(id(func), ())

    def shards_inside_param(self, func: Func, param: str) -> bool:
        """True if calling ``func`` shards submodules of its parameter ``param``."""
        return param in self._shard_analysis[2].get(id(func), ())

    def origins(self, key: str, func: Func, depth: int = 0) -> set[str]:
        """``key`` and the keys it was taken from: ``layer`` in ``for layer in model.layers``
        comes from ``model.layers[]``; ``block = model.blocks[0]`` from ``model.blocks[]``."""
        if depth >= 3 or "." in key or "[" in key:
            return {key}
        cached = self._origin_cache.get((id(func), key)) if depth == 0 else None
        if cached is not None:
            return cached
        out = {key}
        for a in self.values_of(key, func):
            value = a.value
            while isinstance(value, ast.Call):
                if isinstance(value.func, ast.Attribute):
                    value = value.func.value  # model.modules(), model.get_submodule("x")
                elif value.args and last_name(value.func) in _ITERATORS:
                    value = value.args[0]  # enumerate(model.layers)
                else:
                    break
            src = key_of(value) if value is not None else None
            if src is not None and src != key:
                if a.loop:
                    src += "[]"  # an item of the iterable, not the iterable itself
                out |= self.origins(src, a.func, depth + 1) | {src}
        if depth == 0:
            self._origin_cache[(id(func), key)] = out
        return out

    def sharded_keys(self, kind: str) -> set[str]:
        """Every key that is sharded with ``kind`` in some scope (a cheap pre-filter)."""
        return {key for (_, key), kinds in self._shard_analysis[0].items() if kind in kinds}

    def shard_kinds(self, key: str, func: Func) -> set[str]:
        """How the module ``key`` (seen from ``func``) is sharded: subset of fsdp1/fsdp2."""
        return self._shard_analysis[0].get((id(self.scope_for(key, func)), key), set())

    def parameter_owners(self, expr: ast.expr | None, func: Func, depth: int = 0) -> list[str]:
        """Keys ``K`` such that ``expr`` holds ``K.parameters()`` (or ``named_parameters``),
        looking through lists, dicts (param groups), comprehensions, wrapping calls such as
        ``list(...)`` or ``filter(...)``, and names bound once to such an expression."""
        if expr is None or depth > _FOLLOW_DEPTH:
            return []
        memo_key = ("owners", id(expr), id(func))
        if depth == 0 and memo_key in self.memo:
            return self.memo[memo_key]
        owners: list[str] = []
        if isinstance(expr, ast.Call):
            f = expr.func
            if isinstance(f, ast.Attribute) and f.attr in ("parameters", "named_parameters"):
                key = key_of(f.value)
                owners = [key] if key is not None else []
            else:
                for arg in [*expr.args, *(k.value for k in expr.keywords)]:
                    owners += self.parameter_owners(arg, func, depth + 1)
        elif isinstance(expr, ast.Name):
            for a in self.values_of(expr.id, func):
                if a.value is not None and not a.loop:
                    owners += self.parameter_owners(a.value, a.func, depth + 1)
        elif isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            for elt in expr.elts:
                owners += self.parameter_owners(elt, func, depth + 1)
        elif isinstance(expr, ast.Starred):
            owners = self.parameter_owners(expr.value, func, depth + 1)
        elif isinstance(expr, ast.Dict):
            for value in expr.values:
                owners += self.parameter_owners(value, func, depth + 1)
        elif isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            for gen in expr.generators:
                owners += self.parameter_owners(gen.iter, func, depth + 1)
        elif isinstance(expr, ast.BinOp):
            owners = self.parameter_owners(expr.left, func, depth + 1)
            owners += self.parameter_owners(expr.right, func, depth + 1)
        if depth == 0:
            self.memo[memo_key] = owners
        return owners


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
