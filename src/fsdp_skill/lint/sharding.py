"""Which modules are sharded (FSDP1 or FSDP2), where their parts and parameters come from."""

from __future__ import annotations

import ast
from functools import cached_property
from typing import TYPE_CHECKING

from fsdp_skill.lint.nodes import FOLLOW_DEPTH, call_arg, key_of, last_name, root_of, shard_kind

if TYPE_CHECKING:
    from fsdp_skill.lint.records import Func

_ITERATORS = {"enumerate", "zip", "list", "tuple", "reversed", "sorted", "iter"}


class ShardQueries:
    """Sharding questions the file model answers (mixed into ``FileModel``)."""

    @cached_property
    def _shard_analysis(self) -> tuple[dict, dict, dict]:
        """Which modules are sharded, and which function parameters get sharded inside.

        FSDP2: a key passed to ``fully_shard``. FSDP1: a key bound to
        ``FullyShardedDataParallel(...)``. Follows assignments (``b = a``), arguments of local
        functions and their return values. Returns ``(kinds, shards, shards_inside)``:
        ``{(id(owner), key): {"fsdp1"|"fsdp2"}}``, ``{id(func): params it shards or wraps}``
        and ``{id(func): params whose submodules it shards}``."""
        kinds: dict[tuple[int, str], set[str]] = {}
        shards: dict[int, dict[str, str]] = {}  # id(func) -> {param: "fsdp1" | "fsdp2"}
        inside: dict[int, dict[str, str]] = {}
        returns_kind: dict[int, set[str]] = {}

        kinded: set[str] = set()  # keys with a kind in some scope: a cheap first test

        def add(owner: object, key: str, kind: str) -> bool:
            slot = kinds.setdefault((id(owner), key), set())
            if kind in slot:
                return False
            slot.add(kind)
            kinded.add(key)
            return True

        def mark_param(func: Func, key: str, table: dict, kind: str) -> bool:
            if key not in func.params or key in table.get(id(func), {}):
                return False
            table.setdefault(id(func), {})[key] = kind
            return True

        def kinds_of(expr: ast.expr | None, func: Func) -> set[str]:
            return self._kinds_of(expr, func, kinds, kinded, returns_kind)

        direct = [c for c in self.calls if shard_kind(c.name)]
        if not direct:
            return kinds, shards, inside  # nothing is sharded in this file
        for call in direct:  # fixed facts: what each fully_shard / FSDP(...) call shards
            self._mark_shard_call(call, shard_kind(call.name), add, mark_param, shards, inside)
        local = [c for c, _ in self.local_calls]
        carriers = {id(c.node) for c in direct} | {id(c.node) for c in local}
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
        returning = [f for f in self.all_functions if f.returns]
        for _ in range(5):  # facts that travel: arguments, assignments, return values
            changed = False
            for call in local:
                callee = self.local_callee(call)
                for param, arg in self.bound_args(call, callee):
                    kind = shards.get(id(callee), {}).get(param)
                    if kind is not None:
                        changed |= self._mark_shard_call(
                            call, kind, add, mark_param, shards, inside, target=arg
                        )
                    for k in kinds_of(arg, call.func):
                        changed |= add(callee, param, k)
            for a in flows:
                for k in kinds_of(a.value, a.func):
                    changed |= add(self.owner_of(a), a.key, k)
            for func in returning:
                for ret in func.returns:
                    for k in kinds_of(ret, func):
                        if k not in returns_kind.setdefault(id(func), set()):
                            returns_kind[id(func)].add(k)
                            changed = True
            if not changed:
                break
        return kinds, shards, inside

    def _kinds_of(
        self, expr: ast.expr | None, func: Func, kinds: dict, kinded: set, returns_kind: dict
    ) -> set[str]:
        """The sharding kinds known so far of the module ``expr`` stands for (a method, not a
        closure of ``_shard_analysis``: a recursive closure is a reference cycle that would
        keep the whole file model alive after the run)."""
        if isinstance(expr, ast.Call):
            kind = shard_kind(self.call_name(expr))
            if kind == "fsdp1":
                return {"fsdp1"}
            if kind == "fsdp2":
                inner = call_arg(expr, 0, "module")
                return self._kinds_of(inner, func, kinds, kinded, returns_kind) | {"fsdp2"}
            record = self.call_of.get(id(expr))
            callee = self.local_callee(record) if record else None
            if callee is not None and callee.name != "__init__":
                return set(returns_kind.get(id(callee), ()))
            return set()
        key = key_of(expr)
        if key is None or key not in kinded:
            return set()
        return set(kinds.get((id(self.scope_for(key, func)), key), ()))

    def _mark_shard_call(self, call, kind, add, mark_param, shards, inside, target=None) -> bool:
        """Record what one sharding call (or a helper that shards ``target``) shards."""
        changed = False
        if target is None:
            arg = call_arg(call.node, 0, "module")
            targets = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
        else:
            targets = [target]
        for expr in targets:
            key = key_of(expr) if expr is not None else None
            if key is None:
                continue
            owner = self.scope_for(key, call.func)
            if kind == "fsdp2":
                changed |= add(owner, key, "fsdp2")
            if owner is call.func:
                changed |= mark_param(call.func, key, shards, kind)
            for origin in self.origins(key, call.func):
                root = root_of(origin)
                if origin != root and self.scope_for(root, call.func) is call.func:
                    changed |= mark_param(call.func, root, inside, kind)
        return changed

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
        if expr is None or depth > FOLLOW_DEPTH:
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
