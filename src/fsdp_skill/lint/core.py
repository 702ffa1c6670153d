"""The file model: everything the rules know about one module, built by one walk of its AST.

``walker.Walker`` records imports, definitions, calls and bindings with their context;
``FileModel`` then answers the rules' questions from those records ("which dotted name does this
call invoke?", "which values were bound to ``params``?", "which function does this call run?"),
following simple assignments and calls of functions defined in the same file. Rank questions
live in ``ranks.RankQueries`` and sharding questions in ``sharding.ShardQueries``.
"""

from __future__ import annotations

import ast
from functools import cached_property

from fsdp_skill.lint.nodes import FOLLOW_DEPTH, is_under, key_of
from fsdp_skill.lint.ranks import RankQueries
from fsdp_skill.lint.records import Assign, Call, Class, Func
from fsdp_skill.lint.sharding import ShardQueries
from fsdp_skill.lint.walker import Walker


class FileModel(RankQueries, ShardQueries):
    """Everything the rules know about one module, built by one walk of its AST."""

    def __init__(
        self, tree: ast.Module, package: str | None = None, name: str | None = None
    ) -> None:
        self.tree = tree
        self.package = package
        """The package relative imports resolve against (None: unknown, they are skipped)."""
        self.name = name
        """This module's dotted name in its project (None: not known)."""
        self.project = None
        """The ``project.Project`` this module was linted in (calls into the project's other
        modules are followed through it); set by the engine."""
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
        self.discarded: set[int] = set()
        """Ids of the calls that are whole statements (their result is thrown away)."""
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
        Walker(self).visit_many(tree.body)
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

    @cached_property
    def _used_names(self) -> set[str]:
        return self.identifiers | {name.rsplit(".", 1)[-1] for name in self.aliases.values()}

    def uses(self, *lasts: str) -> bool:
        """True if the file imports or mentions any of these names (a cheap pre-check)."""
        return not self._used_names.isdisjoint(lasts)

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

    def method_calls_on(self, key: str) -> list[Call]:
        """Calls ``key.something(...)`` (``kwargs.update(...)``, ``sampler.set_epoch(e)``)."""
        return [
            call
            for call in self.calls
            if call.node.func.__class__ is ast.Attribute and key_of(call.node.func.value) == key
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
        if key is None or depth >= FOLLOW_DEPTH:
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
