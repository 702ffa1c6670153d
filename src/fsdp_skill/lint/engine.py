"""Lint one source text: parse once, build the file model once, run the selected rules."""

from __future__ import annotations

import ast
import contextlib
import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.lint import versions
from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.hfconfig.codes import CONFIG_CODES
from fsdp_skill.lint.rules import CODES, all_rules

ALL_CODES = CODES + CONFIG_CODES
"""Python checks, then the Hugging Face config checks (FSDP101 and up)."""

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    r"^\s*#\s*fsdp-skill:\s*noqa(?::\s*(?P<codes>[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_TRIGGERS = ("torch", "dist", "fsdp", "FSDP", "DataLoader", "local_rank", "local-rank")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    severity: str
    message: str
    fix: str
    ref: str

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "ref": self.ref,
        }


def normalise_codes(codes: list[str] | None, option: str) -> set[str] | None:
    """Upper-cased codes, prefixes expanded (``FSDP01`` -> FSDP010..FSDP019); None if None."""
    if codes is None:
        return None
    out: set[str] = set()
    for raw in codes:
        for part in str(raw).split(","):
            code = part.strip().upper()
            if not code:
                continue
            matched = {c for c in ALL_CODES if c.startswith(code)}
            if not matched:
                from fsdp_skill.errors import UsageError

                raise UsageError(f"{option}: unknown rule code {code!r} ({code_ranges()})")
            out |= matched
    return out


def code_ranges() -> str:
    """``FSDP001..FSDP025, FSDP101..FSDP111``: the codes that exist, for messages."""
    return f"{CODES[0]}..{CODES[-1]}, {CONFIG_CODES[0]}..{CONFIG_CODES[-1]}"


def find_rule(code: str):
    """The Python rule or the config rule with this code (None: no such code)."""
    from fsdp_skill.lint.hfconfig.rules import config_rule
    from fsdp_skill.lint.rules import rule

    return rule(code) or config_rule(code)


def chosen_codes(select: list[str] | None, ignore: list[str] | None) -> set[str]:
    chosen = normalise_codes(select, "--select") or set(ALL_CODES)
    return chosen - (normalise_codes(ignore, "--ignore") or set())


def noqa_lines(source: str) -> dict[int, set[str] | None]:
    """``{line: codes}`` for ``# noqa: FSDPnnn`` comments (None: a bare ``# noqa``); line 0
    holds a whole-file ``# fsdp-skill: noqa[: FSDPnnn]`` on a line of its own."""
    out: dict[int, set[str] | None] = {}
    if "noqa" not in source and "NOQA" not in source:
        return out
    for match in _FILE_NOQA.finditer(source):
        codes = match.group("codes")
        if codes is None:
            out[0] = None
        elif out.get(0, set()) is not None:
            out[0] = out.get(0, set()) | {c.strip().upper() for c in codes.split(",")}
    for number, line in enumerate(source.splitlines(), start=1):
        if "#" not in line:
            continue
        match = _NOQA.search(line)
        if match:
            codes = match.group("codes")
            out[number] = {c.strip().upper() for c in codes.split(",")} if codes else None
    return out


def suppressed(noqa: dict[int, set[str] | None], node: ast.AST, code: str) -> bool:
    """True if a ``# noqa`` of the file, or of the node's first or last line, silences ``code``."""
    first = getattr(node, "lineno", 0)
    last = getattr(node, "end_lineno", first) or first
    for line in (0, first, last):
        if line in noqa:
            codes = noqa[line]
            if codes is None or code in codes:
                return True
    return False


def lint_tree(
    tree: ast.Module,
    source: str,
    path: str,
    codes: set[str],
    version: tuple[int, int],
) -> tuple[list[Finding], list[str]]:
    """Findings of the rules in ``codes`` on one parsed module on its own (no project: calls
    into other modules lead nowhere), and the reasons it could not be fully checked."""
    if not triggered(source):
        return [], []
    from fsdp_skill.lint.project import Project

    try:
        model = FileModel(tree)
    except RecursionError:
        return [], ["too deeply nested to analyse"]
    project = Project()
    project.add_target(Path(path), model)
    try:
        return lint_model(model, source, path, codes, version)
    finally:
        project.release()


def triggered(source: str) -> bool:
    """False for a file with no torch, distributed or data-loading code at all (no rule can
    fire on it, so it is not analysed)."""
    return any(word in source for word in _TRIGGERS)


def lint_model(
    model: FileModel,
    source: str,
    path: str,
    codes: set[str],
    version: tuple[int, int],
) -> tuple[list[Finding], list[str]]:
    """Findings of the rules in ``codes`` on a file model (of a project), and the reasons
    the file could not be fully checked (too deeply nested, or a rule that failed on it: the
    other rules still run)."""
    noqa = noqa_lines(source)
    findings = []
    problems = []
    for rule in all_rules():
        if rule.code not in codes:
            continue
        try:
            hits = list(rule.check(model))
        except RecursionError:
            problems.append(f"{rule.code} skipped: too deeply nested to analyse")
            continue
        except Exception as exc:  # a rule bug must not hide the other rules' findings
            problems.append(f"{rule.code} failed on this file: {type(exc).__name__}: {exc}")
            continue
        for node, message in hits:
            if suppressed(noqa, node, rule.code):
                continue
            findings.append(
                Finding(
                    path=path,
                    line=getattr(node, "lineno", 1),
                    col=getattr(node, "col_offset", 0) + 1,
                    code=rule.code,
                    severity=rule.severity,
                    message=message,
                    fix=rule.fix(version),
                    ref=f"pitfall:{rule.pitfall}",
                )
            )
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    return findings, problems


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off (restored afterwards).

    A project is linted with every file's tree and model alive at once (calls are followed
    between them), so each automatic collection would rescan all of them: on a few hundred
    files that costs more than the linting. The models' own cycles are broken by
    ``Project.release`` at the end, so plain reference counting frees them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse(source: str, path: str) -> ast.Module:
    """Parse ``source``; raises SyntaxError/ValueError with a one-line reason."""
    return ast.parse(source, filename=path)


def resolve_version(torch_version: str | None) -> tuple[int, int]:
    if torch_version is None:
        return versions.installed()
    try:
        return versions.parse(torch_version)
    except ValueError as exc:
        from fsdp_skill.errors import UsageError

        raise UsageError(f"--torch-version: {exc}") from None
