"""The one pass over a module's AST: imports, definitions, calls and bindings, each recorded
with its context (enclosing function, rank-only branch, loop depth, ``with`` items, order)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from fsdp_skill.lint.nodes import key_of
from fsdp_skill.lint.records import Assign, Branch, Call, Class, Func

if TYPE_CHECKING:
    from fsdp_skill.lint.core import FileModel


class Walker:
    """Visits every node once, keeping the context that records carry."""

    def __init__(self, model: FileModel) -> None:
        self.m = model
        self.func = model.module
        self.branch: Branch | None = None
        self.loop = 0
        self.withs: tuple[ast.Call, ...] = ()
        self.cls: Class | None = None
        self.exit_guard: Branch | None = None
        """Set by an ``if <rank test>: return``: the branch the rest of its block runs in."""

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
        saved = self.branch
        for node in nodes:
            self.visit(node)
            if self.exit_guard is not None:  # the rest of this block runs on some ranks only
                self.branch, self.exit_guard = self.exit_guard, None
        self.branch = saved

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.m.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.m.aliases[top] = top
            self.m.imports.append((node, alias.name))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module
        if node.level:
            module = _absolute(self.m.package, node.level, node.module)
        if not module:
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            self.m.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            self.m.imports.append((node, f"{module}.{alias.name}"))

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
        if rank and not node.orelse and node.body and _exits(node.body[-1]):
            self.exit_guard = Branch(node, True, after_exit=True)

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

    def _bind(
        self,
        target: ast.AST,
        value: ast.expr | None,
        node: ast.AST,
        loop: bool,
        unpacked: tuple[ast.expr, int] | None = None,
    ) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            literal = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(
                target.elts
            )
            values = value.elts if literal else [None] * len(target.elts)
            for i, (sub, sub_value) in enumerate(zip(target.elts, values, strict=True)):
                # a loop target unpacks items of the iterable: keep the iterable as the source
                if loop:
                    self._bind(sub, value, node, loop)
                elif literal or value is None or isinstance(sub, ast.Starred):
                    self._bind(sub, sub_value, node, loop)
                else:  # ``a, b = helper()``: remember which item of which value
                    self._bind(sub, None, node, loop, unpacked=(value, i))
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
        record.unpacked = unpacked
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
        if node.value.__class__ is ast.Call:
            self.m.discarded.add(id(node.value))
        self.visit(node.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 300:
            self.m.strings.append(node)


def _exits(statement: ast.stmt) -> bool:
    """True if the statement returns: the ranks that take the branch skip the rest. (A
    ``raise`` is an error path, not a choice of ranks: it says nothing about who goes on.)"""
    return isinstance(statement, ast.Return)


def _absolute(package: str | None, level: int, module: str | None) -> str | None:
    """The absolute module a relative import names (``from ..utils import x`` inside
    ``pkg.train``), or None when the file's package is unknown or the import climbs above it."""
    if package is None:
        return None
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or (level - 1 == len(parts) and not module):
        return None
    base = parts[: len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) or None


_DISPATCH = {
    ast.Import: Walker.visit_Import,
    ast.ImportFrom: Walker.visit_ImportFrom,
    ast.ClassDef: Walker.visit_ClassDef,
    ast.FunctionDef: Walker.visit_FunctionDef,
    ast.AsyncFunctionDef: Walker.visit_AsyncFunctionDef,
    ast.Lambda: Walker.visit_Lambda,
    ast.Return: Walker.visit_Return,
    ast.If: Walker.visit_If,
    ast.For: Walker.visit_For,
    ast.AsyncFor: Walker.visit_AsyncFor,
    ast.While: Walker.visit_While,
    ast.ListComp: Walker.visit_comprehension_owner,
    ast.SetComp: Walker.visit_comprehension_owner,
    ast.GeneratorExp: Walker.visit_comprehension_owner,
    ast.DictComp: Walker.visit_comprehension_owner,
    ast.With: Walker.visit_With,
    ast.AsyncWith: Walker.visit_AsyncWith,
    ast.Assign: Walker.visit_Assign,
    ast.AnnAssign: Walker.visit_AnnAssign,
    ast.AugAssign: Walker.visit_AugAssign,
    ast.NamedExpr: Walker.visit_NamedExpr,
    ast.Global: Walker.visit_Global,
    ast.Call: Walker.visit_Call,
    ast.Name: Walker.visit_Name,
    ast.Attribute: Walker.visit_Attribute,
    ast.Expr: Walker.visit_Expr,
    ast.Constant: Walker.visit_Constant,
    ast.JoinedStr: Walker.skip,  # f-strings: formatted output, nothing the rules look at
}
for _leaf in (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop):
    for _cls in _leaf.__subclasses__():
        _DISPATCH[_cls] = Walker.skip
