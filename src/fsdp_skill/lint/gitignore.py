"""A small ``.gitignore`` matcher: ``*``, ``?``, ``**``, ``[...]``, leading ``/``, trailing
``/`` (folders only) and ``!`` negation, with patterns relative to the file's folder.

Globs are matched segment by segment with a greedy matcher, not translated to regular
expressions: a line of a hundred ``*`` costs the same as one (git reads them alike), and no
pattern makes the match take more than (pattern length x path length) steps."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.roots import Roots


class _Wildcard:
    def __init__(self, glob: str) -> None:
        self.glob = glob

    def __repr__(self) -> str:
        return self.glob


_STAR = _Wildcard("*")
_ANY = _Wildcard("?")
_DEEP = _Wildcard("**")
"""A whole ``**`` segment: any number of folders."""


@dataclass(frozen=True)
class _Pattern:
    segments: tuple
    """Per ``/``-separated part: ``_DEEP``, or a tuple of tokens (a character, ``_STAR``,
    ``_ANY``, or a compiled one-character class)."""
    negate: bool
    dir_only: bool

    def matches(self, rel: str) -> bool:
        return _match_path(self.segments, rel.split("/"))


def _segment_tokens(part: str) -> tuple:
    """One path segment's glob as tokens; runs of ``*`` are one ``*`` (as git reads them)."""
    tokens: list = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
        elif c == "?":
            tokens.append(_ANY)
        elif c == "[" and (cls := _char_class(part, i)) is not None:
            tokens.append(cls[0])
            i = cls[1]
        elif c == "\\" and i + 1 < len(part):
            i += 1
            tokens.append(part[i])
        else:
            tokens.append(c)
        i += 1
    return tuple(tokens)


def _char_class(part: str, start: int) -> tuple[re.Pattern[str], int] | None:
    """``[...]`` at ``start`` as a one-character regex and the index of its ``]``, or None
    when it is not a valid class (then ``[`` is a plain character)."""
    end = part.find("]", start + 2 if part[start + 1 : start + 2] in ("!", "^", "]") else start + 1)
    if end == -1:
        return None
    body = part[start + 1 : end].replace("\\", "\\\\")
    if body.startswith("!"):
        body = "^" + body[1:]
    try:
        return re.compile(f"[{body}]"), end
    except re.error:
        return None


def _one(token, char: str) -> bool:
    if token is _ANY:
        return char != "/"
    if isinstance(token, str):
        return token == char
    return token.fullmatch(char) is not None


def _match_segment(tokens: tuple, text: str) -> bool:
    """Glob match of one segment, greedy with one saved ``*`` position: at most
    len(tokens) x len(text) steps, whatever the pattern (no regex, no backtracking)."""
    t = i = 0
    star_t, star_i = -1, 0
    while i < len(text):
        if t < len(tokens) and tokens[t] is _STAR:
            star_t, star_i = t, i
            t += 1
        elif t < len(tokens) and _one(tokens[t], text[i]):
            t += 1
            i += 1
        elif star_t >= 0:
            star_i += 1
            t, i = star_t + 1, star_i
        else:
            return False
    while t < len(tokens) and tokens[t] is _STAR:
        t += 1
    return t == len(tokens)


def _match_path(segments: tuple, parts: list[str]) -> bool:
    """Whether the segments match the path parts; ``**`` takes zero or more parts (one or
    more when it ends the pattern: ``dir/**`` is what is inside ``dir``). Tracks the set of
    reachable segment positions: at most len(segments) x len(parts) segment matches."""
    last = len(segments) - 1
    states = _close({0}, segments)
    for part in parts:
        following = set()
        for s in states:
            if s > last:
                continue
            if segments[s] is _DEEP:
                following.add(s)  # ** takes this part and may take more
                if s == last:
                    following.add(s + 1)
            elif _match_segment(segments[s], part):
                following.add(s + 1)
        states = _close(following, segments)
        if not states:
            return False
    return len(segments) in states


def _close(states: set[int], segments: tuple) -> set[int]:
    """Add the positions reached by letting a ``**`` that is not last take no part."""
    found = set(states)
    pending = list(states)
    while pending:
        s = pending.pop()
        if s < len(segments) - 1 and segments[s] is _DEEP and s + 1 not in found:
            found.add(s + 1)
            pending.append(s + 1)
    return found


def _compile(line: str) -> tuple:
    """The segments of a pattern line (leading ``/`` and anchoring already applied)."""
    parts = line.split("/")
    return tuple(_DEEP if part == "**" else _segment_tokens(part) for part in parts)


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
            segments = _compile(line if anchored else "**/" + line)
            self.patterns.append(_Pattern(segments, negate, dir_only))

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
            if pattern.matches(rel):
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
