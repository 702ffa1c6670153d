"""Project-wide analysis: the project's own modules, the calls between them, and what a call
reaches.

A ``Project`` knows the folders that imports resolve from (each linted file's top package
folder, plus any folder given), parses the project's modules on demand (never imports them),
and answers three questions the rules ask:

- ``callees(model, call)``: the project functions a call runs (same file or another module;
  ``pkg.mod.helper()``, ``from .utils import helper``, re-exports in ``__init__``,
  ``Cls(...)``, ``obj.method()`` on an instance of a known class);
- ``reaches(model, func, effect)``: whether running ``func`` may perform an effect (set the
  device, destroy the group, call ``set_epoch``, run a collective, ...), through any depth of
  such calls;
- ``ancestors(model, func)``: the functions of the linted files that lead to ``func``.

A call into code outside the project (another package, a ``**kwargs`` call the rules cannot
resolve) leads nowhere: rules that need to know stay silent instead of guessing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from fsdp_skill.lint.nodes import is_under, key_of, last_name
from fsdp_skill.lint.records import Call, Class, Func

if TYPE_CHECKING:
    from fsdp_skill.lint.core import FileModel

MAX_MODULES = 400
"""Modules parsed on demand per run, beyond the linted files (a bound on the work)."""
_MAX_ANCESTORS = 200
_DEVICE_SETTERS = {"set_device", "set_device_index", "set_device_idx"}
_LIBRARY_DEVICE_SETUP = (
    # library entry points that call set_device for LOCAL_RANK themselves:
    # transformers/training_args.py (_setup_devices), accelerate/state.py (PartialState)
    "accelerate.Accelerator",
    "accelerate.PartialState",
    "accelerate.state.PartialState",
    "accelerate.state.AcceleratorState",
    "transformers.TrainingArguments",
    "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments",
)

Site = tuple["FileModel", Func]


def locate(path: Path, packages: dict | None = None) -> tuple[Path, str]:
    """The folder imports of ``path`` resolve from, and its dotted module name there: the
    folder above its outermost package (folders with ``__init__.py``). ``packages`` caches
    the answer per folder (files of one folder share it)."""
    path = path.resolve()
    leaf = [] if path.name == "__init__.py" else [path.stem]
    cached = packages.get(path.parent) if packages is not None else None
    if cached is None:
        parts: list[str] = []
        folder = path.parent
        while (folder / "__init__.py").is_file() and folder.parent != folder:
            parts.insert(0, folder.name)
            folder = folder.parent
        cached = (folder, parts)
        if packages is not None:
            packages[path.parent] = cached
    root, parts = cached
    return root, ".".join([*parts, *leaf])


def package_of(name: str, is_init: bool) -> str:
    """The package that relative imports of module ``name`` resolve against."""
    return name if is_init else name.rpartition(".")[0]


class Project:
    """The linted files and the project modules they reach."""

    def __init__(self, roots: Iterable[Path] = (), confine=None) -> None:
        self.confine = confine
        """The MCP server's ``Roots``: a module outside them is never read (None: any)."""
        self.roots: list[Path] = []
        self._root_set: set[Path] = set()
        self.packages: dict[Path, tuple[Path, list[str]]] = {}
        """Folder -> (import root, package parts): ``locate``'s cache for this run."""
        self._tops: dict[str, bool] = {}
        for root in roots:
            self.add_root(Path(root))
        self.targets: list[FileModel] = []
        self._models: dict[Path, FileModel | None] = {}
        self._by_name: dict[str, FileModel | None] = {}
        self._loaded = 0
        self._callees: dict[tuple[int, int, bool], list[Site]] = {}
        self._reach: dict[tuple[int, int, str, bool], bool] = {}
        self._callers: dict[str, list[tuple[FileModel, Call]]] | None = None
        self._resolved_callers: dict[tuple[int, int], list[Site]] = {}

    # -- modules --------------------------------------------------------------------------------

    def add_root(self, root: Path) -> None:
        root = root.resolve()
        if root not in self._root_set:
            self._root_set.add(root)
            self.roots.append(root)
            self._tops.clear()

    def add_target(self, path: Path, model: FileModel) -> None:
        """Register a linted file (its model answers for its module name from now on)."""
        model.project = self
        self.targets.append(model)
        self._models[path.resolve()] = model
        if model.name:
            self._by_name.setdefault(model.name, model)
        self._callers = None
        self._resolved_callers.clear()

    def _has_top(self, top: str) -> bool:
        if top not in self._tops:
            self._tops[top] = any(
                (root / top).is_dir() or (root / f"{top}.py").is_file() for root in self.roots
            )
        return self._tops[top]

    def module(self, name: str) -> FileModel | None:
        """The parsed module ``name`` of the project, or None (not the project's, or bad)."""
        if name in self._by_name:
            return self._by_name[name]
        found = None
        if self._has_top(name.split(".", 1)[0]) and self._loaded < MAX_MODULES:
            rel = Path(*name.split("."))
            for root in self.roots:
                for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                    if candidate.is_file() and self._readable(candidate):
                        found = self._load(candidate, name)
                        break
                if found is not None:
                    break
        self._by_name[name] = found
        return found

    def _readable(self, path: Path) -> bool:
        return self.confine is None or self.confine.contains(path)

    def _load(self, path: Path, name: str) -> FileModel | None:
        key = path.resolve()
        if key in self._models:
            return self._models[key]
        from fsdp_skill.lint.core import FileModel
        from fsdp_skill.lint.files import read_source

        self._loaded += 1
        model = None
        source = read_source(path)
        if isinstance(source, str):
            try:
                tree = ast.parse(source, filename=str(path))
                model = FileModel(tree, package_of(name, path.name == "__init__.py"), name)
                model.project = self
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                model = None
        self._models[key] = model
        return model

    def resolve_name(self, dotted: str, depth: int = 0) -> tuple[FileModel, Func | Class] | None:
        """The project function or class a dotted name refers to (following re-exports)."""
        parts = dotted.split(".")
        if depth > 4 or len(parts) < 2 or not self._has_top(parts[0]):
            return None
        for cut in range(len(parts) - 1, 0, -1):
            model = self.module(".".join(parts[:cut]))
            if model is not None:
                return self._member(model, parts[cut:], depth)
        return None

    def _member(
        self, model: FileModel, rest: list[str], depth: int
    ) -> tuple[FileModel, Func | Class] | None:
        head = rest[0]
        if head in model.functions and len(rest) == 1:
            return model, model.functions[head]
        cls = model.classes.get(head)
        if cls is not None:
            if len(rest) == 1:
                return model, cls
            method = cls.methods.get(rest[1])
            return (model, method) if method is not None and len(rest) == 2 else None
        if head in model.aliases:
            return self.resolve_name(".".join([model.aliases[head], *rest[1:]]), depth + 1)
        return None

    # -- calls ----------------------------------------------------------------------------------

    def callees(self, m: FileModel, call: Call, loose: bool = False) -> list[Site]:
        """The project functions ``call`` may run. ``loose`` adds, for ``obj.name()`` with an
        unknown receiver, every method ``name`` of this file's classes (for questions where
        assuming more calls makes a rule more silent)."""
        key = (id(m), id(call), loose)
        found = self._callees.get(key)
        if found is None:
            found = self._callees[key] = self._find_callees(m, call, loose)
        return found

    def _find_callees(self, m: FileModel, call: Call, loose: bool) -> list[Site]:
        local = m.local_callee(call)
        if local is not None:
            return [(m, local)]
        name = call.name
        if name and not is_under(name, "torch"):
            target = self.resolve_name(name)
            if target is not None:
                return _as_sites(*target)
        func = call.node.func
        if isinstance(func, ast.Attribute):
            if _is_super(func.value):
                return _base_methods(m, call.func, func.attr)
            cls = self._instance_class(m, func.value, call.func)
            if cls is not None:
                owner, klass = cls
                method = klass.methods.get(func.attr)
                return [(owner, method)] if method is not None else []
            if loose:
                return [
                    (m, c.methods[func.attr]) for c in m.classes.values() if func.attr in c.methods
                ]
        return []

    def _instance_class(
        self, m: FileModel, receiver: ast.expr, func: Func
    ) -> tuple[FileModel, Class] | None:
        """The class of ``receiver`` when it is bound once to ``Cls(...)`` of the project."""
        key = key_of(receiver)
        if key is None or key == "self":
            return None
        bound = m.values_of(key, func)
        if len(bound) != 1 or not isinstance(bound[0].value, ast.Call):
            return None
        ctor = bound[0].value.func
        if isinstance(ctor, ast.Name) and ctor.id in m.classes and ctor.id not in m.aliases:
            return m, m.classes[ctor.id]
        name = m.qualname(ctor)
        target = self.resolve_name(name) if name and not is_under(name, "torch") else None
        if target is not None and isinstance(target[1], Class):
            return target  # type: ignore[return-value]
        return None

    def references(self, m: FileModel, call: Call) -> list[Site]:
        """Local functions handed to ``call`` as arguments (``mp.spawn(train, ...)``,
        ``atexit.register(cleanup)``, ``Thread(target=run)``): they run on its behalf."""
        out = []
        for arg in [*call.node.args, *(k.value for k in call.node.keywords)]:
            if isinstance(arg, (ast.Name, ast.Attribute, ast.Lambda)):
                ref = m.function_ref(arg, call.func)
                if ref is not None:
                    out.append((m, ref))
        return out

    # -- effects ------------------------------------------------------------------------------

    def reaches(self, m: FileModel, func: Func, effect: str, loose: bool = False) -> bool:
        """True if running ``func`` may perform ``effect`` (see ``EFFECTS``), directly or
        through calls of project functions at any depth."""
        key = (id(m), id(func), effect, loose)
        if key in self._reach:
            return self._reach[key]
        self._reach[key] = False  # in progress: a recursive call adds nothing
        direct = EFFECTS[effect]
        result = False
        for call in func.calls:
            if direct(m, call):
                result = True
                break
            nxt = self.callees(m, call, loose) + self.references(m, call)
            if any(self.reaches(cm, cf, effect, loose) for cm, cf in nxt if cf is not func):
                result = True
                break
        if not result and effect == "epoch_loop":
            result = _has_epoch_loop(m, func)
        self._reach[key] = result
        return result

    def ancestors(self, m: FileModel, func: Func) -> list[Site]:
        """``func`` and the functions of the linted files that call it, directly or through
        other calls (module-level code included); loose about unknown receivers."""
        seen = {(id(m), id(func))}
        out: list[Site] = [(m, func)]
        i = 0
        while i < len(out) and len(out) < _MAX_ANCESTORS:
            cm, cf = out[i]
            i += 1
            for caller in self._callers_of(cm, cf):
                k = (id(caller[0]), id(caller[1]))
                if k not in seen:
                    seen.add(k)
                    out.append(caller)
            if cf.parent is not None and cf.cls is None and cf.node is not None:
                # a nested function runs when its enclosing function does (the usual case)
                parent = cf.parent
                k = (id(cm), id(parent))
                if k not in seen and parent.node is not None:
                    seen.add(k)
                    out.append((cm, parent))
        return out

    def runs_from_entry(self, m: FileModel, func: Func) -> bool:
        """True if some chain of calls from module-level code (a script's entry point, an
        ``if __name__ == "__main__":`` block) of a linted file leads to ``func``. False for a
        library helper that nothing in the project calls: its callers are elsewhere, and they
        may well do what the rule looks for."""
        return func.is_module or any(af.is_module for _, af in self.ancestors(m, func))

    def _callers_of(self, m: FileModel, func: Func) -> list[Site]:
        """The functions of the linted files with a call that runs ``func`` (or hands it over
        to run later). Only calls spelled with ``func``'s name are resolved: a call reaches a
        project function through that name (``helper()``, ``obj.helper()``, ``Cls()`` for
        ``__init__``, ``spawn(helper)``) or an import alias of it, which the index also holds."""
        if func.is_module:
            return []  # module-level code runs on import: nothing calls it
        if self._callers is None:
            self._callers = self._index_by_name()
        names = [func.name]
        if func.name == "__init__" and func.cls is not None:
            names.append(func.cls.name)  # ``Cls(...)`` runs it, as does ``super().__init__()``
        key = (id(m), id(func))
        found = self._resolved_callers.get(key)
        if found is None:
            found = []
            candidates = [c for name in names for c in self._callers.get(name, ())]
            for t, call in candidates:
                sites = self.callees(t, call, loose=True) + self.references(t, call)
                if any(cm is m and cf is func for cm, cf in sites) and call.func is not func:
                    found.append((t, call.func))
            self._resolved_callers[key] = found
        return found

    def _index_by_name(self) -> dict[str, list[tuple[FileModel, Call]]]:
        """``{name: [(linted file, call)]}``: each call under the last part of what it calls
        (as written and through imports) and of the names it passes as arguments."""
        # only names the linted files define can lead to a function whose callers are asked
        # for (the climb starts in a linted file and only ever finds callers there)
        defined: set[str] = set()
        for t in self.targets:
            defined.update(f.name for f in t.all_functions)
            defined.update(t.classes)
        index: dict[str, list[tuple[FileModel, Call]]] = {}
        name_class, attr_class = ast.Name, ast.Attribute
        for t in self.targets:
            for call in t.calls:
                node = call.node
                for expr in (node.func, *node.args, *(kw.value for kw in node.keywords)):
                    cls = expr.__class__
                    name = (
                        expr.id if cls is name_class else expr.attr if cls is attr_class else None
                    )
                    if name in defined:
                        index.setdefault(name, []).append((t, call))
                if call.name:  # an import alias: ``from .utils import helper as h``
                    tail = call.name.rsplit(".", 1)[-1]
                    if tail in defined and tail != last_name(node.func):
                        index.setdefault(tail, []).append((t, call))
        return index

    def release(self) -> None:
        """Free every model this project parsed (see ``FileModel.release``)."""
        for model in {id(m): m for m in [*self.targets, *self._models.values()] if m}.values():
            model.release()
            model.project = None
        self.targets = []
        self._models.clear()
        self._by_name.clear()
        self._callees.clear()
        self._reach.clear()
        self._callers = None
        self._resolved_callers.clear()


def _is_super(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"
    )


def _base_methods(m: FileModel, func: Func, name: str) -> list[Site]:
    """``super().name()`` inside a class: method ``name`` of its base classes in this file."""
    scope: Func | None = func
    while scope is not None and scope.cls is None:
        scope = scope.parent
    if scope is None:
        return []
    out = []
    for base in scope.cls.bases:
        cls = m.classes.get(base.id) if isinstance(base, ast.Name) else None
        if cls is not None and cls is not scope.cls and name in cls.methods:
            out.append((m, cls.methods[name]))
    return out


def _as_sites(model: FileModel, target: Func | Class) -> list[Site]:
    if isinstance(target, Class):
        init = target.methods.get("__init__")
        return [(model, init)] if init is not None else []
    return [(model, target)]


def _sets_device(m: FileModel, call: Call) -> bool:
    func = call.node.func
    if isinstance(func, ast.Attribute) and func.attr in _DEVICE_SETTERS:
        return True
    name = call.name or ""
    if name in ("torch.cuda.device", "torch.xpu.device") and call.node in call.withs:
        return True
    return name.startswith(_LIBRARY_DEVICE_SETUP)


def _destroys(m: FileModel, call: Call) -> bool:
    """A destroy_process_group call, or the function handed over to run later
    (``atexit.register(dist.destroy_process_group)``)."""
    if last_name(call.node.func) == "destroy_process_group":
        return True
    return any(last_name(arg) == "destroy_process_group" for arg in call.node.args)


def _sets_epoch(m: FileModel, call: Call) -> bool:
    return last_name(call.node.func) == "set_epoch"


def _collective(m: FileModel, call: Call) -> bool:
    from fsdp_skill.lint.rules._api import is_collective, on_subset

    return bool(is_collective(m, call)) and not on_subset(call)


def _materialises(m: FileModel, call: Call) -> bool:
    func = call.node.func
    if isinstance(func, ast.Attribute) and func.attr == "to_empty":
        return True
    return isinstance(func, ast.Attribute) and func.attr == "load_state_dict"


def _never(m: FileModel, call: Call) -> bool:
    return False


def _has_epoch_loop(m: FileModel, func: Func) -> bool:
    """True if ``func`` loops over epochs (``for epoch in range(...)``)."""
    for key, records in m.assigns.items():
        if "epoch" not in key.lower() or "." in key:
            continue
        for a in records:
            if a.func is func and a.loop and isinstance(a.value, ast.Call):
                if last_name(a.value.func) in ("range", "trange", "tqdm"):
                    return True
    return False


EFFECTS: dict[str, Callable[[FileModel, Call], bool]] = {
    "set_device": _sets_device,
    "destroy": _destroys,
    "set_epoch": _sets_epoch,
    "collective": _collective,
    "materialise": _materialises,
    "epoch_loop": _never,  # decided per function (``_has_epoch_loop``), not per call
}
