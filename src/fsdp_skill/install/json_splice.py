"""Edit one member of a JSON object in place, leaving every other byte of the file as it was.

A user's client config holds their other servers, comments (in JSON-with-comments files),
key order and formatting. Re-serialising the parsed document would rewrite all of that, so
these functions find the byte span of the member to change and splice new text in there.
Comments and trailing commas (allowed when ``jsonc``) are blanked to spaces in a working
copy of the same length, so positions found in the copy are valid in the original.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


class JsonSyntaxError(ValueError):
    """The text is not valid JSON (or JSON with comments, where allowed)."""


@dataclass(frozen=True)
class Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


def _blank(text: str, start: int, end: int, out: list[str]) -> None:
    for i in range(start, end):
        out[i] = "\n" if text[i] == "\n" else " "


def strip_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments and trailing commas blanked (same length)."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            last_comma = None
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            _blank(text, i, j, out)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise JsonSyntaxError(f"unterminated /* comment at line {_line(text, i)}")
            _blank(text, i, j + 2, out)
            i = j + 2
        elif c == ",":
            last_comma = i
            i += 1
        elif c in "}]":
            if last_comma is not None:
                out[last_comma] = " "
            last_comma = None
            i += 1
        else:
            if c not in _WS:
                last_comma = None
            i += 1
    return "".join(out)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def load(text: str, jsonc: bool) -> tuple[Any, str]:
    """Parse ``text``; returns the value and the working copy positions refer to."""
    clean = strip_comments(text) if jsonc else text
    try:
        value, end = _DECODER.raw_decode(clean, _skip(clean, 0))
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if _skip(clean, end) != len(clean):
        raise JsonSyntaxError(f"line {_line(clean, end)}: extra data after the JSON value")
    return value, clean


def members(clean: str, start: int) -> tuple[list[Member], int]:
    """The members of the object whose ``{`` is at ``start``, and the index of its ``}``."""
    found: list[Member] = []
    pos = _skip(clean, start + 1)
    while clean[pos] != "}":
        key, after_key = json.decoder.scanstring(clean, pos + 1)
        colon = _skip(clean, after_key)
        value_start = _skip(clean, colon + 1)
        _, value_end = _DECODER.raw_decode(clean, value_start)
        found.append(Member(key, pos, value_start, value_end))
        pos = _skip(clean, value_end)
        if clean[pos] == ",":
            pos = _skip(clean, pos + 1)
    return found, pos


def _indent_of(text: str, pos: int) -> str:
    """The whitespace that starts the line holding ``pos``."""
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group(0) if match else ""


def _indent_unit(text: str) -> str:
    for line in text.splitlines():
        match = re.match(r"([ \t]+)\S", line)
        if match:
            return match.group(1)
    return "  "


def _dump(value: Any, indent: str, unit: str, newline: str) -> str:
    body = json.dumps(value, indent=unit, ensure_ascii=False)
    return body.replace("\n", newline + indent)


def _find_object(value: Any, clean: str, path: tuple[str, ...]) -> tuple[int, Any]:
    """Start index of the object at ``path`` (keys from the top) and its parsed value."""
    pos = _skip(clean, 0)
    for key in path:
        found, _ = members(clean, pos)
        member = next((m for m in reversed(found) if m.key == key), None)
        if member is None:
            raise KeyError(key)
        pos, value = member.value_start, value[key]
    return pos, value


def set_member(text: str, jsonc: bool, path: tuple[str, ...], key: str, new: Any) -> str:
    """``text`` with ``key`` of the object at ``path`` set to ``new``; everything else kept.

    The object at ``path`` must exist. An existing member's value is replaced in place; a
    new member goes after the last one, in the file's own indentation and line endings.
    """
    _, clean = load(text, jsonc)
    start, _ = _find_object(json.loads(clean), clean, path)
    found, end = members(clean, start)
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = _indent_unit(text)
    existing = next((m for m in reversed(found) if m.key == key), None)
    if existing is not None:
        indent = _indent_of(text, existing.key_start)
        value = _dump(new, indent, unit, newline)
        return text[: existing.value_start] + value + text[existing.value_end :]
    if found:
        last = found[-1]
        multiline = "\n" in clean[start : found[0].key_start]
        indent = _indent_of(text, last.key_start)
        body = (
            _dump(new, indent, unit, newline) if multiline else json.dumps(new, ensure_ascii=False)
        )
        member = f"{json.dumps(key, ensure_ascii=False)}: {body}"
        sep = f",{newline}{indent}" if multiline else ", "
        return text[: last.value_end] + sep + member + text[last.value_end :]
    outer = _indent_of(text, start)
    indent = outer + unit
    member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(new, indent, unit, newline)}"
    inner = f"{newline}{indent}{member}{newline}{outer}"
    return text[: start + 1] + inner + text[end:]


def remove_member(text: str, jsonc: bool, path: tuple[str, ...], key: str) -> str:
    """``text`` without member ``key`` of the object at ``path`` (unchanged if absent)."""
    value, clean = load(text, jsonc)
    try:
        start, _ = _find_object(value, clean, path)
    except KeyError:
        return text
    found, end = members(clean, start)
    index = next((i for i in range(len(found) - 1, -1, -1) if found[i].key == key), None)
    if index is None:
        return text
    member = found[index]
    if len(found) == 1:
        return text[: start + 1] + text[end:]
    if index + 1 < len(found):
        return text[: member.key_start] + text[found[index + 1].key_start :]
    comma = clean.index(",", found[index - 1].value_end)
    return text[:comma] + text[member.value_end :]
