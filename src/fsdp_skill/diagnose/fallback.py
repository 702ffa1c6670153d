"""When no known error matches: search the references with the text's own exception line.

``explain`` is never a dead end: the line that most looks like the error (the last
``SomethingError: message`` line, else the last line that says "error", else the last line)
is cleaned of paths, addresses and long numbers and searched; the best sections come back as
"possibly related".
"""

from __future__ import annotations

import re

from fsdp_skill.diagnose.normalize import strip_decorations

RELATED_K = 3
QUERY_CHARS = 300

_EXCEPTION = re.compile(
    r"(?:^|\s)([A-Za-z_][\w.]{0,500}?(?:Error|Exception|Warning|Interrupt))"
    r"(?::[ \t]?|\s*$)"
)
_ERRORISH = re.compile(r"error|fail|timed out|timeout|cannot|unable", re.IGNORECASE)
_SOURCE_LINE = re.compile(r"^(?:raise|return|assert|except|[\w.]{1,80} ?=)\b")
_FRAME = re.compile(r'File "[^"]{1,500}", line \d{1,7}, in ([\w<>]{1,80})')
FRAMES = 2
"""Function names of the deepest frames added to the query when no exception line is found."""
_NOISE = re.compile(
    r"(?:[A-Za-z]:)?[\\/][^\s\\/]{1,200}[\\/][^\s]{0,2000}"  # file paths
    r"|0x[0-9a-fA-F]{1,32}"  # addresses
    r"|\b\d{3,40}\b"  # pids, sizes, line numbers
)


def exception_line(text: str) -> str:
    """The line of ``text`` to search for: the last exception line, else the last error line."""
    lines = [strip_decorations(line) for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    chosen = next((line for line in reversed(lines) if _EXCEPTION.search(line)), None)
    if chosen is None:  # a cut traceback: its last words and deepest frames say the most
        said = [
            line
            for line in lines
            if _ERRORISH.search(line) and not _SOURCE_LINE.match(line) and not _FRAME.search(line)
        ]
        frames = [m.group(1) for m in map(_FRAME.search, lines) if m]
        chosen = " ".join([*(said[-1:] or lines[-1:]), *frames[-FRAMES:]])
    return " ".join(_NOISE.sub(" ", chosen).split())[:QUERY_CHARS]


def related(text: str) -> tuple[list[dict], str]:
    """Up to three sections of the references for ``text``'s exception line, and that line."""
    line = exception_line(text)
    if not line:
        return [], ""
    from fsdp_skill.errors import UsageError
    from fsdp_skill.search import search

    try:
        results = search(line, k=RELATED_K)["results"]
    except UsageError:  # no searchable word in the line, or no bundle to search
        return [], line
    keep = ("id", "title", "path", "snippet")
    return [{k: r[k] for k in keep} for r in results], line
