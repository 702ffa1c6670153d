"""A small ``.gitignore`` matcher: ``*``, ``?``, ``**``, ``[...]``, leading ``/``, trailing
``/`` (folders only) and ``!`` negation, with patterns relative to the file's folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.roots import Roots


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(glob: str) -> str:
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class GitIgnore:
    """The patterns of one ``.gitignore`` file, matched against paths below its folder."""

    def __init__(self, base: Path, text: str) -> None:
        self.base = base
        self.patterns: list[_Pattern] = []
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            body = _translate(line)
            prefix = "^" if anchored else "^(?:.*/)?"
            self.patterns.append(_Pattern(re.compile(prefix + body + "$"), negate, dir_only))

    def ignored(self, path: Path, is_dir: bool) -> bool | None:
        """True/False if a pattern decides for ``path`` (the last match wins), else None."""
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        verdict = None
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.match(rel):
                verdict = not pattern.negate
        return verdict


def load(folder: Path, roots: Roots | None = None) -> GitIgnore | None:
    """The ``.gitignore`` of ``folder``, if it has a readable one (inside ``roots``, if given)."""
    path = folder / ".gitignore"
    if roots is not None and not roots.contains(path):
        return None
    try:
        return GitIgnore(folder, path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
