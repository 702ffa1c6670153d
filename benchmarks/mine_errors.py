"""Mine the error and warning messages that torch, transformers, accelerate and peft can raise.

Walks the installed packages' FSDP-related sources (``torch/distributed`` fsdp, fully_shard,
checkpoint, tensor, device_mesh, elastic/run, c10d; the FSDP code of transformers, accelerate
and peft), collects every ``raise`` and ``warnings.warn`` whose message is a literal, an f-string,
a ``%``-format or a ``.format`` call (formatted parts become ``{}``), and the c10d and Gloo message
strings of the torch shared library. ProcessGroupNCCL's messages are not in the CPU wheel: they
are read from ``error_catalog_nccl.toml`` (the public source at the torch release tag, kept as data).

Each template is mapped by the first rule of ``error_catalog.toml`` that matches it: to a
pitfall (whose signatures must then recognise the message), to a reference section, or to
"unmapped" with a reason. The report gives, per module: templates, mapped, unmapped.

    python benchmarks/mine_errors.py [--fast] [--markdown] [--list unmapped|mapped|all]

``--fast`` reads only Python sources (no shared-library scan); the test suite runs it.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
RULES = HERE / "error_catalog.toml"
NCCL = HERE / "error_catalog_nccl.toml"
HOLE = "{}"
"""What a formatted part of a message becomes in its template."""

# module name: (package, globs of files under it); the first matching module names a file.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "fsdp2": (
        "torch",
        ("distributed/fsdp/_fully_shard/**/*.py", "distributed/_composable/**/*.py"),
    ),
    "fsdp1": ("torch", ("distributed/fsdp/**/*.py",)),
    "dcp": ("torch", ("distributed/checkpoint/**/*.py", "distributed/_state_dict_utils.py")),
    "device_mesh": ("torch", ("distributed/device_mesh.py", "distributed/_mesh_layout.py")),
    "dtensor": ("torch", ("distributed/tensor/**/*.py",)),
    "elastic": (
        "torch",
        ("distributed/elastic/**/*.py", "distributed/run.py", "distributed/launcher/**/*.py"),
    ),
    "c10d": (
        "torch",
        (
            "distributed/distributed_c10d.py",
            "distributed/rendezvous.py",
            "distributed/utils.py",
            "distributed/c10d_logger.py",
            "distributed/constants.py",
            "distributed/algorithms/join.py",
        ),
    ),
    "transformers": ("transformers", ("integrations/fsdp.py", "trainer.py", "training_args.py")),
    "accelerate": (
        "accelerate",
        ("utils/fsdp_utils.py", "utils/dataclasses.py", "accelerator.py", "state.py"),
    ),
    "peft": ("peft", ("utils/other.py", "tuners/tuners_utils.py", "utils/save_and_load.py")),
}
GOAL_MODULES = ("fsdp1", "fsdp2", "dcp", "device_mesh", "c10d")
"""The modules the mapping goal (90% mapped) is about."""
FSDP_WORDS = re.compile(r"fsdp|fully.?shard|shard|FlatParam|DTensor|device.?mesh", re.IGNORECASE)
"""Messages of the broad HF files count only when they speak of FSDP."""
BROAD = {"transformers", "accelerate", "peft"}

# c10d and Gloo strings in the shared library: printable runs that name the subsystem.
_LIB_STRING = re.compile(rb"[\x20-\x7e]{24,400}")
_LIB_KEEP = re.compile(
    rb"(?:Timed out|timed out|Connection|socket|Socket|TCPStore|store|rendezvous|ProcessGroup|"
    rb"Gloo|gloo|collective|Rank \{?|rank|world size|backend)",
)
_LIB_MESSAGE = re.compile(rb"^[A-Z][a-z]|^[a-z]+ [a-z]")
_LIB_NOISE = re.compile(rb"[_:]{2}[A-Za-z]|\.cpp|\.h\b|%[a-z]|^\W|[{}]{2}|\bstd::|\bc10::")


@dataclass(frozen=True)
class Template:
    module: str
    path: str
    line: int
    kind: str
    """``raise ValueError``, ``warn``, ``c++``."""
    text: str
    scope: tuple[str, ...] = ()
    """The classes and functions around the raise, outermost first."""

    def example(self) -> str:
        """The message with every formatted part filled in (with a number), as torch prints it."""
        return self.text.replace(HOLE, "1")


@dataclass
class Rule:
    match: re.Pattern[str]
    modules: tuple[str, ...] = ()
    pitfall: str = ""
    section: str = ""
    unmapped: str = ""
    api: tuple[str, ...] = ()
    """Name prefixes: the template maps to the API page of the public function or class around it."""
    kinds: tuple[str, ...] = ()
    """Only templates of these kinds (``raise AssertionError``, ``warn``…)."""
    internal: bool = False
    """An unmapped rule for internal invariants: not an error a user causes."""
    used: int = 0

    @property
    def target(self) -> str:
        return f"pitfall:{self.pitfall}" if self.pitfall else self.section

    def target_for(self, template: Template, api_ids: set[str]) -> str | None:
        """Where this rule sends ``template`` (None: the rule does not apply to it)."""
        if self.modules and template.module not in self.modules:
            return None
        if self.kinds and template.kind not in self.kinds:
            return None
        if not self.match.search(template.text):
            return None
        if not self.api:
            return self.target if not self.unmapped else ""
        scope = [name for name in template.scope if not name.startswith("_")]
        for prefix in self.api:
            for i in range(len(scope)):
                for name in (".".join(scope[i:]), scope[i]):
                    if f"api:{prefix}{name}" in api_ids:
                        return f"api:{prefix}{name}"
        return None


@dataclass
class Report:
    templates: list[Template] = field(default_factory=list)
    mapping: dict[Template, tuple[Rule, str] | None] = field(default_factory=dict)
    """Template -> (the rule that decided, its target: "pitfall:…", a section id, "" if unmapped)."""


# --- Python sources -----------------------------------------------------------------------------


def _format_string(node: ast.AST) -> str | None:
    """The template of a message expression, or None when it is not built from literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append(HOLE)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _format_string(node.left), _format_string(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _format_string(node.left)
        if left is None:
            return None
        return re.sub(r"%(?:\(\w+\))?[-+ #0]*\d*(?:\.\d+)?[sdifrxeEgGc]", HOLE, left)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        base = _format_string(node.func.value)
        if base is None:
            return None
        return re.sub(r"\{[^{}]{0,60}\}", HOLE, base)
    return None


def _message_of(call: ast.Call) -> str | None:
    args = list(call.args)
    if not args:
        for kw in call.keywords:
            if kw.arg in ("msg", "message"):
                args = [kw.value]
    return _format_string(args[0]) if args else None


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def templates_in_source(source: str, module: str, path: str) -> list[Template]:
    """Every raise/warn message template of one Python file."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    scopes: dict[ast.AST, tuple[str, ...]] = {}
    for parent in ast.walk(tree):
        here = scopes.get(parent, ())
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            here = (*here, parent.name)
        for child in ast.iter_child_nodes(parent):
            scopes[child] = here
    for node in ast.walk(tree):
        call, kind = None, ""
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call, kind = node.exc, f"raise {_name(node.exc.func)}"
        elif isinstance(node, ast.Call) and _name(node.func) == "warn":
            call, kind = node, "warn"
        if call is None:
            continue
        text = _message_of(call)
        if text is None:
            continue
        text = " ".join(text.split())
        if len(text.replace(HOLE, "").strip()) < 8:
            continue  # a bare "{}" or a one-word message says nothing to map
        if module in BROAD and not FSDP_WORDS.search(text):
            continue
        found.append(Template(module, path, node.lineno, kind, text, scopes.get(node, ())))
    return found


def _package_root(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def python_templates() -> list[Template]:
    """The templates of every module's Python files (each file counted in its first module)."""
    seen: set[Path] = set()
    found: list[Template] = []
    for module, (package, globs) in MODULES.items():
        root = _package_root(package)
        if root is None:
            continue
        for pattern in globs:
            for path in sorted(root.glob(pattern)):
                if path in seen or "/test" in path.as_posix():
                    continue
                seen.add(path)
                rel = f"{package}/{path.relative_to(root).as_posix()}"
                found += templates_in_source(path.read_text(encoding="utf-8"), module, rel)
    return _unique(found)


def _unique(templates: list[Template]) -> list[Template]:
    """One template per (module, text): the same message raised in several places counts once."""
    out: dict[tuple[str, str], Template] = {}
    for t in templates:
        out.setdefault((t.module, t.text), t)
    return list(out.values())


# --- native strings -------------------------------------------------------------------------------


def library_templates() -> list[Template]:
    """c10d and Gloo message strings of torch's CPU library (the wheel has no NCCL)."""
    root = _package_root("torch")
    lib = root / "lib" / "libtorch_cpu.so" if root else None
    if lib is None or not lib.exists():
        return []
    data = lib.read_bytes()
    found = []
    for m in _LIB_STRING.finditer(data):
        raw = m.group(0).strip()
        if not _LIB_KEEP.search(raw) or not _LIB_MESSAGE.search(raw) or _LIB_NOISE.search(raw):
            continue
        if raw.count(b" ") < 3:
            continue
        text = " ".join(raw.decode("ascii").split())
        found.append(Template("c10d-native", "torch/lib/libtorch_cpu.so", 0, "c++", text))
    return _unique(found)


def nccl_templates() -> list[Template]:
    """ProcessGroupNCCL's messages, from the public source kept in error_catalog_nccl.toml."""
    if not NCCL.exists():
        return []
    data = tomllib.loads(NCCL.read_text(encoding="utf-8"))
    return _unique(
        [
            Template(
                "nccl", data["source"], int(m.get("line", 0)), "c++", " ".join(m["text"].split())
            )
            for m in data["message"]
        ]
    )


# --- mapping ---------------------------------------------------------------------------------------


def load_rules(path: Path = RULES) -> list[Rule]:
    """The mapping rules, in order (the first that matches a template decides)."""
    rules = []
    for entry in tomllib.loads(path.read_text(encoding="utf-8"))["rule"]:
        targets = [k for k in ("pitfall", "section", "unmapped", "api") if entry.get(k)]
        if len(targets) != 1:
            raise ValueError(
                f"rule {entry.get('match')!r}: give one of pitfall, section, api, unmapped"
            )
        rules.append(
            Rule(
                re.compile(entry["match"], re.IGNORECASE),
                tuple(entry.get("modules", ())),
                entry.get("pitfall", ""),
                entry.get("section", ""),
                entry.get("unmapped", ""),
                tuple(entry.get("api", ())),
                tuple(entry.get("kinds", ())),
                bool(entry.get("internal", False)),
            )
        )
    return rules


def api_section_ids() -> set[str]:
    """The ids of the bundle's API reference sections (``api:torch....``)."""
    from fsdp_skill.search import bundle_dir, sections

    return {s.id for s in sections.bundle_sections(bundle_dir()) if s.id.startswith("api:")}


def map_templates(templates: list[Template], rules: list[Rule]) -> Report:
    """Each template's mapping: the first rule that applies (its target) or None."""
    report = Report(templates)
    api_ids = api_section_ids()
    for t in templates:
        chosen = None
        for rule in rules:
            target = rule.target_for(t, api_ids)
            if target is not None:
                chosen = (rule, target)
                break
        if chosen is not None:
            chosen[0].used += 1
        report.mapping[t] = chosen
    return report


def mine(fast: bool = False) -> Report:
    """Every template, mapped by the rules."""
    templates = python_templates() + nccl_templates()
    if not fast:
        templates += library_templates()
    return map_templates(templates, load_rules())


def summary(report: Report) -> list[tuple[str, int, int, int, int, int]]:
    """Per module: (module, templates, to a pitfall, to a section, unmapped, internal invariants)."""
    rows: dict[str, Counter] = {}
    for t, chosen in report.mapping.items():
        c = rows.setdefault(t.module, Counter())
        c["total"] += 1
        target = chosen[1] if chosen else ""
        if chosen and chosen[0].internal:
            c["internal"] += 1
        if not target:
            c["unmapped"] += 1
        elif target.startswith("pitfall:"):
            c["pitfall"] += 1
        else:
            c["section"] += 1
    order = list(MODULES) + ["nccl", "c10d-native"]
    return [
        (m, c["total"], c["pitfall"], c["section"], c["unmapped"], c["internal"])
        for m in order
        if (c := rows.get(m))
    ]


def table(report: Report) -> list[str]:
    """The per-module report as a Markdown table."""
    lines = [
        "| module | templates | to a pitfall | to a section | mapped | internal invariants "
        "| mapped of the rest | other unmapped (with reason) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    goal = Counter()
    for module, total, pitfall, section, unmapped, internal in summary(report):
        mapped = pitfall + section
        user = total - internal
        lines.append(
            f"| {module} | {total} | {pitfall} | {section} | {_pct(mapped, total)} | {internal} "
            f"| {_pct(mapped, user)} | {unmapped - internal} |"
        )
        if module in GOAL_MODULES:
            goal.update(total=total, mapped=mapped, user=user)
    if goal["total"]:
        lines.append(
            f"| **FSDP1, FSDP2, DCP, DeviceMesh, c10d** | {goal['total']} | | | "
            f"**{_pct(goal['mapped'], goal['total'])}** | {goal['total'] - goal['user']} | "
            f"**{_pct(goal['mapped'], goal['user'])}** | |"
        )
    return lines


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="Python sources only")
    parser.add_argument("--list", choices=("unmapped", "mapped", "all"), help="list templates")
    args = parser.parse_args(argv)
    report = mine(fast=args.fast)
    print("\n".join(table(report)))
    if args.list:
        for t, chosen in sorted(report.mapping.items(), key=lambda kv: (kv[0].module, kv[0].path)):
            unmapped = chosen is None or not chosen[1]
            if args.list == "all" or (args.list == "unmapped") == unmapped:
                shown = "-" if chosen is None else chosen[1] or f"unmapped: {chosen[0].unmapped}"
                print(f"{t.module}\t{t.path}:{t.line}\t{t.kind}\t{t.text[:160]}\t-> {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
