"""Turn a torch docstring (reST and Google style mixed, as torch writes them) into Markdown.

Handled: Google sections (``Args:``, ``Returns:``, ``Example::`` ...) as bold labels with
parameter lists, reST directives (``.. note::``, ``.. warning::``, ``.. code-block::``,
``.. versionadded::``), literal blocks after ``::``, doctest blocks, and the inline roles
(``:class:`~torch.x.Y```, ``:func:``, ``:ref:`text <target>```, double back-quotes).

Code stays code: a block is fenced as ``python snippet`` only when it parses and every torch
name in it resolves (``is_checked_python``); otherwise as ``pycon`` (doctest) or ``text``,
so the bundle's checks never see Python they cannot check.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|attr|mod|obj|data|exc|const|ref|doc|term):`([^`]+)`"
)
_DOUBLE = re.compile(r"``([^`]+)``")
_LINK = re.compile(r"`([^`<]+?)\s*<(https?://[^>]+)>`_{0,2}")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Kwargs|Returns|Return|Yields|"
    r"Raises|Attributes|Example|Examples|Note|Notes|Warning|Warnings|See Also|Shape|"
    r"Return type|Type)\s*:(:?)\s*$"
)
_LIST_SECTIONS = {
    "Args",
    "Arguments",
    "Parameters",
    "Keyword Args",
    "Keyword Arguments",
    "Kwargs",
    "Attributes",
    "Raises",
}
_CODE_SECTIONS = {"Example", "Examples"}
_DIRECTIVE = re.compile(r"^\.\.\s+([A-Za-z][\w-]*)\s?(::?)\s*(.*)$")
_FIELD = re.compile(r"^:(param|parameter|arg|type|returns?|rtype|raises?)\s*([^:]*):\s*(.*)$")
_PARAM = re.compile(r"^(\*{0,2}[A-Za-z_][\w]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_XDOCTEST = re.compile(r"^\s*(>>>|\.\.\.)?\s*#\s*(xdoctest|doctest):", re.IGNORECASE)

Checker = Callable[[str], bool]


def inline(text: str) -> str:
    """Inline reST markup to Markdown: roles, double back-quotes, external links."""

    def role(match: re.Match[str]) -> str:
        target = match.group(1)
        label = re.match(r"^(.*?)\s*<([^>]+)>$", target)
        if label:
            return label.group(1)
        if target.startswith("~"):
            target = target[1:].rsplit(".", 1)[-1]
        return f"`{target}`"

    text = _LINK.sub(lambda m: f"[{m.group(1).strip()}]({m.group(2)})", text)
    text = _ROLE.sub(role, text)
    return _DOUBLE.sub(r"`\1`", text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _take_block(lines: list[str], start: int, base: int) -> tuple[list[str], int]:
    """Lines from ``start`` indented deeper than ``base`` (blank lines inside kept), dedented."""
    block: list[str] = []
    i = start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        block.append(lines[i])
        i += 1
    while block and not block[-1].strip():
        block.pop()
        i -= 1
    while block and not block[0].strip():
        block.pop(0)
    depth = min((_indent(b) for b in block if b.strip()), default=0)
    return [b[depth:] for b in block], i


def fence(code: str, checked: Checker) -> list[str]:
    """A code block fenced with the most precise language the bundle's checks allow."""
    lines = [ln for ln in code.strip("\n").split("\n") if not _XDOCTEST.match(ln)]
    if any(ln.lstrip().startswith(">>>") for ln in lines):
        stripped = [re.sub(r"^\s*(>>>|\.\.\.) ?", "", ln) for ln in lines if ln.strip()]
        plain = "\n".join(stripped)
        if not any(not re.match(r"^\s*(>>>|\.\.\.)", ln) for ln in lines if ln.strip()):
            if checked(plain):
                return ["```python snippet", plain, "```"]
        return ["```pycon", *lines, "```"]
    body = "\n".join(lines)
    if checked(body):
        return ["```python snippet", body, "```"]
    return ["```text", body, "```"]


def _field_list(lines: list[str], checked: Checker) -> list[str]:
    """A Google-style parameter list as Markdown bullets (code in a description follows it)."""
    out: list[str] = []
    for head, rest in _entries(lines):
        match = _PARAM.match(head)
        first = match.group(3) if match else head
        depth = min((_indent(r) for r in rest if r.strip()), default=0)
        desc = to_markdown("\n".join([first, *(r[depth:] for r in rest)]), checked)
        paragraph, _, after = desc.partition("\n\n")
        text = re.sub(r"\s+", " ", paragraph).strip()
        if match:
            kind = f" {match.group(2)}" if match.group(2) else ""
            out.append(
                f"- `{match.group(1)}`{kind}: {text}" if text else f"- `{match.group(1)}`{kind}"
            )
        else:
            out.append(f"- {text}")
        if after.strip():
            out += ["", after.strip(), ""]
    return out


def _entries(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Split a dedented list into (first line, continuation lines) at indentation 0."""
    entries: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.strip() and _indent(line) == 0:
            entries.append((line.strip(), []))
        elif entries:
            entries[-1][1].append(line)
    return entries


def to_markdown(doc: str, checked: Checker) -> str:
    """The Markdown of one cleaned docstring (``inspect.cleandoc`` output)."""
    lines = doc.expandtabs(4).split("\n")
    out: list[str] = []
    fields: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _indent(line) == 0 and _SECTION.match(stripped):
            name = _SECTION.match(stripped).group(1)
            block, i = _take_block(lines, i + 1, 0)
            out += ["", f"**{name}:**", ""]
            if name in _LIST_SECTIONS:
                out += _field_list(block, checked)
            elif name in _CODE_SECTIONS or stripped.endswith("::"):
                out += _blocks(block, checked)
            else:
                out += [to_markdown("\n".join(block), checked)]
            continue
        directive = _DIRECTIVE.match(stripped)
        if directive and directive.group(2) == ":" and directive.group(1) not in _ADMONITIONS:
            directive = None  # one colon: only the common typo ".. note:" is read as a directive
        if directive and _indent(line) == 0:
            kind, arg = directive.group(1), directive.group(3).strip()
            block, i = _take_block(lines, i + 1, 0)
            while block and re.match(r"^:[\w-]+:(\s|$)", block[0]):  # directive options
                block.pop(0)
            out += _directive(kind, arg, block, checked)
            continue
        field = _FIELD.match(stripped)
        if field and _indent(line) == 0:
            block, i = _take_block(lines, i + 1, 0)
            text = inline(" ".join([field.group(3), *(b.strip() for b in block)]).strip())
            key, name = field.group(1), field.group(2).strip()
            label = f"`{name}`" if name else key.rstrip("s")
            fields.append(f"- {label} ({key}): {text}" if key != "param" else f"- {label}: {text}")
            continue
        if stripped.startswith(("```", "~~~")):  # a Markdown fence written in the docstring
            i = _markdown_fence(lines, i, out, checked)
            continue
        if stripped.startswith(">>>") and _indent(line) == 0:
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += ["", *fence("\n".join(block), checked), ""]
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            block, j = _take_block(lines, i + 1, _indent(line))
            if block:
                text = stripped[:-1] if not stripped.endswith(" ::") else stripped[:-3]
                out.append(inline(text.rstrip(":") + (":" if text.rstrip(":") else "")))
                out += ["", *fence("\n".join(block), checked), ""]
                i = j
                continue
        if stripped.endswith("::"):  # reST: "Example::" reads "Example:", a lone "::" nothing
            line = line.rstrip()[:-2].rstrip() + (":" if stripped != "::" else "")
        out.append(inline(line))
        i += 1
    if fields:
        out += ["", *fields]
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _markdown_fence(lines: list[str], start: int, out: list[str], checked: Checker) -> int:
    """Re-fence a Markdown code block found in a docstring; returns the line after it.

    Python gets the same treatment as reST code (checked, or downgraded); other languages
    keep their tag.
    """
    opening = lines[start].strip()
    mark = opening[:3]
    language = (opening[3:].strip().split() or [""])[0].lower()
    body: list[str] = []
    i = start + 1
    while i < len(lines) and not lines[i].strip().startswith(mark):
        body.append(lines[i])
        i += 1
    depth = min((_indent(b) for b in body if b.strip()), default=0)
    code = "\n".join(b[depth:] for b in body)
    if language in ("", "python", "py", "python3", "pycon"):
        out += ["", *fence(code, checked), ""]
    else:
        out += ["", f"```{language}", code.strip("\n"), "```", ""]
    return i + 1


def _blocks(block: list[str], checked: Checker) -> list[str]:
    """An Example section: doctest runs fenced, prose between them kept; no doctest: all code."""
    if not any(b.lstrip().startswith(">>>") for b in block):
        return fence("\n".join(block), checked) if block else []
    out: list[str] = []
    run: list[str] = []
    for line in [*block, ""]:
        if line.lstrip().startswith((">>>", "...")) or (run and line.strip() and line[:1] == " "):
            run.append(line)
            continue
        if run:
            out += ["", *fence("\n".join(run), checked), ""]
            run = []
        out.append(inline(line))
    return out


_ADMONITIONS = {
    "note": "Note",
    "warning": "Warning",
    "danger": "Warning",
    "caution": "Warning",
    "important": "Important",
    "tip": "Tip",
    "seealso": "See also",
    "hint": "Tip",
    "attention": "Warning",
}


def _quote(lines: list[str]) -> list[str]:
    """Quote prose lines; code fences stay at the margin, where the bundle's checks see them."""
    out: list[str] = []
    fence_mark = ""
    for line in lines:
        if line.startswith(("```", "~~~")):
            if not fence_mark:
                fence_mark = line[:3]
                out.append(line)
                continue
            if line.startswith(fence_mark):
                fence_mark = ""
                out.append(line)
                continue
        if fence_mark:
            out.append(line)
        else:
            out.append(f"> {line}" if line else ">")
    return out


def _directive(kind: str, arg: str, block: list[str], checked: Checker) -> list[str]:
    if kind in _ADMONITIONS:
        inner = to_markdown("\n".join([arg, *block]) if arg else "\n".join(block), checked)
        quoted = _quote(inner.split("\n"))
        if quoted:
            quoted[0] = f"> **{_ADMONITIONS[kind]}:** " + quoted[0][2:]
        return ["", *quoted, ""]
    if kind in ("code-block", "code", "sourcecode", "testcode", "doctest"):
        return ["", *fence("\n".join(block), checked), ""]
    if kind in ("versionadded", "versionchanged", "deprecated"):
        label = {"versionadded": "Added", "versionchanged": "Changed", "deprecated": "Deprecated"}
        rest = " ".join(b.strip() for b in block)
        return ["", f"*{label[kind]} in {arg}.* {inline(rest)}".rstrip(), ""]
    if kind in ("math",):
        return ["", "```text", arg, *block, "```", ""]
    if kind in ("image", "figure", "raw", "autosummary", "toctree", "currentmodule"):
        return []
    return ["", to_markdown("\n".join(block), checked), ""] if block else []
