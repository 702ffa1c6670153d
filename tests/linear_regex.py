"""Which regular expressions can make Python's backtracking engine take more than linear time.

``risks(pattern)`` reads the pattern's structure (``re``'s own parser) and names every place
where a match attempt may scan the same text again and again. The rule, for patterns applied
to text of any length (a log line of a megabyte, a path):

- An unbounded repeat (``*``, ``+``, ``{n,}``, or ``{m,n}`` with n over 1,000) repeats one
  character class (``\\S+``, ``[^)]*``, ``.*``), never a group: no nesting, so no exponential
  blow-up.
- When something after the repeat can still fail, the repeat must not rescan text another
  start of it already scanned. For the first repeat of a searched pattern, some character
  of its lead (``NCCL error in: `` in ``NCCL error in: .*invalid``), or the ``^`` line start
  or a ``(?<![...])`` test before it, must be outside the repeat's class: otherwise a line
  made of the lead repeated costs a full scan per repetition. A later repeat needs a
  character outside its class since the repeat before it, or a class disjoint from that
  repeat's; after a repeat started once per line (the first of a ``match``), a character
  outside the earlier repeat's class is enough.
- Bounded repeats (``{0,400}``) cost at most their bound per attempt, so they are allowed.

``sample(pattern)`` writes a text the pattern matches, and ``worst_inputs`` cuts it into the
lines that hurt a backtracking pattern most: each part before a repeat, repeated to fill a
megabyte, and a megabyte of each repeat's own characters.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

try:  # Python 3.11+
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

C = sre_constants
LARGE = 1_000
"""A bounded repeat with more than this many is counted as unbounded."""
MAX_PATHS = 4_096
_SAMPLE_CHARS = "".join(chr(i) for i in range(128)) + "\u00a0\u00e9\u00df\u0391\u4e2d\u2028\u2014"
_CATEGORIES = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}
_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT} | (
    {C.POSSESSIVE_REPEAT} if hasattr(C, "POSSESSIVE_REPEAT") else set()
)


_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)


class Unsupported(ValueError):
    """A construct the checker does not reason about (a back-reference)."""


@dataclass(frozen=True)
class Token:
    kind: str
    """``char`` (one required character), ``line_start``/``start`` (anchors), ``star`` (an
    unbounded repeat of one class), ``can_fail`` (a zero-width test), ``optional``."""
    chars: frozenset[str] = frozenset()
    text: str = ""


class _Reader:
    def __init__(self, pattern: str, flags: int) -> None:
        parsed = sre_parse.parse(pattern, flags)
        self.flags = parsed.state.flags
        literals = {chr(av) for op, av in _walk(parsed) if op in (C.LITERAL, C.NOT_LITERAL)}
        self.universe = frozenset(_SAMPLE_CHARS) | literals
        self.parsed = parsed

    # -- one character ------------------------------------------------------------------
    def chars(self, op, av, flags: int) -> tuple[frozenset[str], str]:
        """The characters one single-character item matches, and how it is written."""
        fold = flags & re.IGNORECASE
        if op == C.LITERAL:
            c = chr(av)
            found = {c, c.lower(), c.upper()} if fold else {c}
            return frozenset(found), c
        if op == C.NOT_LITERAL:
            c = chr(av)
            return self.universe - {c, c.lower(), c.upper()}, f"[^{re.escape(c)}]"
        if op == C.ANY:
            return (self.universe if flags & re.DOTALL else self.universe - {"\n"}), "."
        if op == C.IN:
            text = "[" + "".join(_class_text(o, a) for o, a in av) + "]"
            if len(av) == 1 and av[0][0] == C.CATEGORY:
                text = text[1:-1]  # \d, not [\d]
            members = re.compile(text, flags & (re.IGNORECASE | re.ASCII | re.UNICODE))
            return frozenset(c for c in self.universe if members.fullmatch(c)), text
        raise KeyError(op)

    # -- a sequence -> every way through it -----------------------------------------------
    def paths(self, items, flags: int, problems: list[str]) -> list[list[Token]]:
        paths: list[list[Token]] = [[]]
        for op, av in items:
            options = self.item(op, av, flags, problems)
            paths = [p + o for p, o in itertools.product(paths, options)]
            if len(paths) > MAX_PATHS:
                problems.append(f"more than {MAX_PATHS} ways through the pattern: simplify it")
                return paths[:MAX_PATHS]
        return paths

    def item(self, op, av, flags: int, problems: list[str]) -> list[list[Token]]:
        if op in _SINGLE:
            chars, text = self.chars(op, av, flags)
            return [[Token("char", chars, text)]]
        if op == C.AT:
            if av == C.AT_BEGINNING_STRING or (av == C.AT_BEGINNING and not flags & re.MULTILINE):
                return [[Token("start", frozenset(), "^")]]
            if av in (C.AT_BEGINNING, C.AT_BEGINNING_LINE):
                return [[Token("line_start", frozenset("\n"), "^")]]
            return [[Token("can_fail", text="$" if "END" in str(av) else r"\b")]]
        if op == C.SUBPATTERN or (hasattr(C, "ATOMIC_GROUP") and op == C.ATOMIC_GROUP):
            if op == C.SUBPATTERN:
                _, add, remove, body = av
                flags = (flags | add) & ~remove
            else:
                body = av
            return self.paths(body, flags, problems)
        if op == C.BRANCH:
            return [p for branch in av[1] for p in self.paths(branch, flags, problems)]
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, body = av
            if any(_is_large(o, a) for o, a in _walk(body)):
                problems.append("an unbounded repeat inside a look-around")
            if direction < 0 and len(body) == 1 and body[0][0] in _SINGLE:
                # (?<![x]) / (?<=[x]): a test of the character before, a fence like ^ is
                chars, text = self.chars(body[0][0], body[0][1], flags)
                before = chars if op == C.ASSERT else self.universe - chars
                sign = "=" if op == C.ASSERT else "!"
                return [[Token("before", before, f"(?<{sign}{text})")]]
            return [[Token("can_fail", text="(?=...)")]]
        if op in _REPEATS:
            return self.repeat(av, flags, problems)
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            raise Unsupported("back-references are not checked: do without them")
        raise Unsupported(f"{op} is not checked")

    def repeat(self, av, flags: int, problems: list[str]) -> list[list[Token]]:
        low, high, body = av
        single = len(body) == 1 and body[0][0] in _SINGLE
        large = high == C.MAXREPEAT or high > LARGE
        if any(o in _REPEATS and (a[1] > 1) for o, a in _walk(body)) and (large or high > 1):
            problems.append("a repeat inside a repeat (nested quantifiers backtrack)")
            return [[]]
        if large:
            if not single:
                problems.append("an unbounded repeat of a group: repeat one character class")
                return [[]]
            chars, text = self.chars(body[0][0], body[0][1], flags)
            suffix = {0: "*", 1: "+"}.get(low, f"{{{low},}}")
            required = [Token("char", chars, text)] * min(low, 3)
            return [required + [Token("star", chars, text + suffix)]]
        inner = self.paths(body, flags, problems)
        if high <= 1:
            return ([[]] if low == 0 else []) + inner
        required = inner if low >= 1 else [[]]
        return [p + [Token("optional")] for p in required]


def _class_text(op, av) -> str:
    if op == C.NEGATE:
        return "^"
    if op == C.LITERAL:
        return re.escape(chr(av))
    if op == C.RANGE:
        return f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}"
    if op == C.CATEGORY:
        return _CATEGORIES.get(av, "")
    raise Unsupported(f"{op} in a character class")


def _walk(items):
    """Every (op, av) of a parsed pattern, nested ones included."""
    for op, av in items:
        yield op, av
        if op == C.SUBPATTERN:
            yield from _walk(av[3])
        elif op in _REPEATS:
            yield from _walk(av[2])
        elif op == C.BRANCH:
            for branch in av[1]:
                yield from _walk(branch)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            yield from _walk(av[1])
        elif hasattr(C, "ATOMIC_GROUP") and op == C.ATOMIC_GROUP:
            yield from _walk(av)
        elif op == C.IN:  # a class's own literals ([\u2502\u2503]) belong to the universe too
            yield from ((o, a) for o, a in av if o == C.LITERAL)


def _is_large(op, av) -> bool:
    return op in _REPEATS and (av[1] == C.MAXREPEAT or av[1] > LARGE)


def risks(pattern: str, flags: int = 0, searched: bool = True) -> list[str]:
    """Why ``pattern`` may take more than linear time; empty when it cannot.

    ``searched``: the pattern is tried at every position (``search``, ``finditer``); False
    for a pattern only tried at the start of each line or string (``match``).
    """
    reader = _Reader(pattern, flags)
    problems: list[str] = []
    try:
        paths = reader.paths(reader.parsed, reader.flags, problems)
    except Unsupported as exc:
        return [str(exc)]
    # A repeat never backtracks if, on some way through the rest, nothing can fail.
    settled = {
        id(token)
        for path in paths
        for index, token in enumerate(path)
        if token.kind == "star" and not _can_fail(path[index + 1 :])
    }
    for path in paths:
        problems += _path_risks(path, searched, settled)
    return sorted(set(problems))


def _can_fail(tokens: list[Token]) -> bool:
    return any(t.kind in ("char", "line_start", "before", "can_fail") for t in tokens)


def _path_risks(path: list[Token], searched: bool, settled: set[int]) -> list[str]:
    """Each unbounded repeat on this path is *anchored* (started from a fixed number of
    places per line), *fenced* (started from many places, but no two starts scan the same
    text), or a risk."""
    found = []
    previous: Token | None = None
    status = "anchored" if not searched else None
    since: list[Token] = []  # required characters and anchors after the previous repeat
    for token in path:
        if token.kind != "star":
            if token.kind in ("char", "line_start", "start", "before"):
                since.append(token)
                if token.kind == "start" and previous is None:
                    status = "anchored"
            continue
        outside_new = any(not (t.chars & token.chars) for t in since)
        if previous is None:
            new_status = status or ("fenced" if outside_new else None)
        else:
            outside_old = any(not (t.chars & previous.chars) for t in since)
            disjoint = not (previous.chars & token.chars)
            if status == "anchored" and (outside_old or disjoint):
                new_status = "anchored"
            elif outside_new or (status and disjoint):
                new_status = "fenced"
            else:
                new_status = None
        if new_status is None and id(token) not in settled:
            if previous is None:
                lead = "".join(t.text for t in since) or "nothing"
                found.append(
                    f"`{token.text}` can run over the text before it ({lead}): a line "
                    "repeating that text is scanned once per repetition; use a class that "
                    "excludes one of its characters, or bound the repeat"
                )
            else:
                found.append(
                    f"`{token.text}` can run over what comes after `{previous.text}`: each "
                    "place the earlier repeat gives back starts a new scan of the same text; "
                    f"put a character `{token.text}` excludes between them"
                )
        previous, status, since = token, new_status or "fenced", []
    return found


def sample(pattern: str, flags: int = 0) -> tuple[str, list[int], list[str]]:
    """A text the pattern's first path matches, where each unbounded repeat starts in it,
    and one character each of those repeats matches (a line break first, if it does)."""
    reader = _Reader(pattern, flags)
    path = reader.paths(reader.parsed, reader.flags, [])[0]
    text, starts, fillers = "", [], []
    for token in path:
        if token.kind == "char":
            text += _pick(token.chars, pattern)
        elif token.kind == "star":
            starts.append(len(text))
            fillers.append("\n" if "\n" in token.chars else _pick(token.chars, pattern))
            text += _pick(token.chars, pattern)
    return text, starts, fillers


def _pick(chars: frozenset[str], pattern: str) -> str:
    """A character of ``chars``, preferring one the pattern itself writes."""
    for c in pattern:
        if c in chars and c.isprintable():
            return c
    printable = sorted(c for c in chars if c.isprintable())
    return printable[0] if printable else sorted(chars)[0]


def worst_inputs(pattern: str, size: int = 1 << 20, flags: int = 0) -> dict[str, str]:
    """Lines of ``size`` characters that make a backtracking pattern work hardest."""
    text, starts, fillers = sample(pattern, flags)
    inputs = {}
    for cut in sorted({*starts, len(text) - 1, len(text)}):
        part = text[:cut]
        if part:
            inputs[f"prefix {part[:40]!r} repeated"] = (part * (size // len(part) + 1))[:size]
    for filler, start in zip(fillers, starts, strict=True):
        head = text[:start]
        inputs[f"{head[:40]!r} then {filler!r} repeated"] = head + filler * (size - len(head))
    return inputs
