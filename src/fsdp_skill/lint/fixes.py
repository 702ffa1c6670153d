"""``lint --diff`` / ``--fix``: the mechanical fixes of a linted file, as a new source text.

Only rules with an ``edit`` function take part, and only their findings that the file does
not silence with ``# noqa``. A file whose fixed text would not parse, or whose edits overlap,
is left as it is.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill.lint.core import FileModel
from fsdp_skill.lint.edits import Text, apply


@dataclass
class FilePlan:
    """What fixing one file would do."""

    path: str
    source: str
    file: Path | None = None
    """The file on disk (``path`` is the name shown)."""
    fixed: str | None = None
    """The new text (None: nothing to fix, or the fix was not safe)."""
    applied: list[dict] = field(default_factory=list)
    """``{"path", "line", "code", "description"}`` per fixed finding."""
    problem: str | None = None

    def diff(self) -> str:
        """A unified diff from the file's text to the fixed text ('' when unchanged)."""
        if self.fixed is None:
            return ""
        lines = difflib.unified_diff(
            self.source.splitlines(keepends=True),
            self.fixed.splitlines(keepends=True),
            fromfile=f"a/{self.path}",
            tofile=f"b/{self.path}",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def plan(model: FileModel, source: str, path: str, codes: set[str]) -> FilePlan:
    """The fixes of the selected rules for one file model (of its project)."""
    from fsdp_skill.lint.engine import noqa_lines, suppressed
    from fsdp_skill.lint.rules import all_rules

    result = FilePlan(path, source)
    text = Text(source)
    noqa = noqa_lines(source)
    edits = []
    for rule in all_rules():
        if rule.edit is None or rule.code not in codes:
            continue
        try:
            hits = list(rule.check(model))
        except Exception:  # the lint run reports a failing rule; fixing just skips it
            continue
        for node, _message in hits:
            if suppressed(noqa, node, rule.code):
                continue
            found = rule.edit(model, node, text)
            if not found:
                continue
            edits += found
            line = getattr(node, "lineno", 1)
            for e in found:
                result.applied.append(
                    {"path": path, "line": line, "code": rule.code, "description": e.description}
                )
    if not edits:
        return result
    fixed = apply(source, edits)
    if fixed is None:
        result.applied = []
        result.problem = "fixes skipped: two of them would change the same text"
        return result
    try:
        ast.parse(fixed, filename=path)
    except (SyntaxError, ValueError):
        result.applied = []
        result.problem = "fixes skipped: the fixed file would not parse"
        return result
    result.fixed = fixed
    return result
