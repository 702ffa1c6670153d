"""Convert a Sphinx docs page (the PyTorch docs and tutorials themes) to Markdown.

Only the main content is kept (the article, not the menus), with its headings, paragraphs,
lists, tables, admonitions, API entries (``dl.py`` blocks become ``###`` headings with the
signature below) and code blocks fenced with their language. Links become absolute.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

_VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "source", "col", "area", "base"}
_DROP = {"script", "style", "nav", "footer", "form", "button", "noscript", "svg", "head"}
_DROP_CLASSES = {"headerlink", "viewcode-link", "sphx-glr-download-link-note", "copybutton"}
_BLOCKS = {"p", "div", "section", "article", "main", "blockquote", "dl", "dd", "figure"}
_LANGS = {
    "python": "python",
    "python3": "python",
    "py": "python",
    "default": "python",
    "ipython3": "python",
    "pycon": "pycon",
    "console": "bash",
    "bash": "bash",
    "shell": "bash",
    "sh": "bash",
    "text": "text",
    "none": "text",
    "yaml": "yaml",
    "json": "json",
    "cpp": "cpp",
    "c++": "cpp",
}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


_CLOSED_BY = {
    "p": _BLOCKS | {"h1", "h2", "h3", "h4", "h5", "h6", "pre", "ul", "ol", "table", "p", "dl"},
    "li": {"li"},
    "dt": {"dt", "dd"},
    "dd": {"dt", "dd"},
    "tr": {"tr"},
    "td": {"td", "th", "tr"},
    "th": {"td", "th", "tr"},
}
"""Tags whose end HTML lets authors omit, and the start tags that end them."""
MAX_DEPTH = 200
"""Deeper nesting is flattened: no real page needs it, and it would exhaust the stack."""


class _TreeBuilder(HTMLParser):
    """A forgiving HTML parser: builds a tree, closes unclosed tags at their parent's end."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root")
        self.current = self.root
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        while tag in _CLOSED_BY.get(self.current.tag, ()) and self.current.parent is not None:
            self.current = self.current.parent  # an implied end tag (<p>, <li>, <td> ...)
            self.depth -= 1
        node = Node(tag, {k: v or "" for k, v in attrs}, parent=self.current)
        self.current.children.append(node)
        if tag not in _VOID and self.depth < MAX_DEPTH:
            self.current = node
            self.depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, []))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.current
        climbed = 0
        while node is not None and node.tag != tag:
            node = node.parent
            climbed += 1
        if node is not None and node.parent is not None:
            self.current = node.parent
            self.depth -= climbed + 1

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def parse(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def _walk(node: Node):
    yield node
    for child in node.children:
        if isinstance(child, Node):
            yield from _walk(child)


def text_of(node: Node | str) -> str:
    if isinstance(node, str):
        return node
    if node.tag in _DROP or node.classes & _DROP_CLASSES:
        return ""
    return "".join(text_of(c) for c in node.children)


def main_content(root: Node) -> Node:
    """The article of a docs page (pydata and the older PyTorch theme), else the body."""
    tests = (
        lambda n: n.tag == "article" and n.attrs.get("role") == "main",
        lambda n: "bd-article" in n.classes,
        lambda n: n.attrs.get("itemprop") == "articleBody",
        lambda n: n.attrs.get("role") == "main",
        lambda n: n.tag == "main",
        lambda n: n.tag == "body",
    )
    for test in tests:
        for node in _walk(root):
            if test(node):
                return node
    return root


def page_title(root: Node) -> str:
    for node in _walk(root):
        if node.tag == "title":
            title = re.sub(r"\s+", " ", text_of(node)).strip()
            return re.split(r"\s+[—|–-]\s+(?=[^—|–-]*(?:documentation|Tutorials|NCCL))", title)[0]
    for node in _walk(root):
        if node.tag == "h1":
            return re.sub(r"\s+", " ", text_of(node)).strip(" ¶#")
    return ""


def links(root: Node, base: str) -> list[str]:
    """Absolute http(s) URLs of every link on the page, fragments dropped, in page order."""
    out: dict[str, None] = {}
    for node in _walk(root):
        href = node.attrs.get("href") if node.tag == "a" else None
        if href and not href.startswith(("mailto:", "javascript:")):
            url = urldefrag(urljoin(base, href))[0]
            if url.startswith(("http://", "https://")):
                out.setdefault(url, None)
    return list(out)


def _language(pre: Node) -> str:
    node: Node | None = pre
    while node is not None:
        for cls in node.classes:
            for prefix in ("highlight-", "language-"):
                if cls.startswith(prefix):
                    return _LANGS.get(cls[len(prefix) :].lower(), "text")
        node = node.parent
    for child in pre.children:
        if isinstance(child, Node) and child.tag == "code":
            for cls in child.classes:
                if cls.startswith("language-"):
                    return _LANGS.get(cls[9:].lower(), "text")
    return "text"


def fenced(code: str, language: str) -> list[str]:
    """A fence whose tag the bundle's checks accept: Python only when it parses."""
    code = code.strip("\n")
    if language == "python":
        if code.lstrip().startswith(">>>"):
            language = "pycon"
        else:
            try:
                ast.parse(code)
                language = "python snippet"
            except SyntaxError:
                language = "text"
    ticks = "````" if "```" in code else "```"
    return [f"{ticks}{language}", code, ticks]


class _Renderer:
    def __init__(self, base: str) -> None:
        self.base = base

    def inline(self, node: Node | str) -> str:
        if isinstance(node, str):
            return re.sub(r"\s+", " ", node)
        if node.tag in _DROP or node.classes & _DROP_CLASSES:
            return ""
        inner = "".join(self.inline(c) for c in node.children)
        if node.tag == "code" or "pre" in node.classes:
            plain = re.sub(r"\s+", " ", text_of(node)).strip()
            return f"`{plain}`" if plain else ""
        if node.tag in ("strong", "b"):
            return f"**{inner.strip()}**" if inner.strip() else ""
        if node.tag in ("em", "i"):
            return f"*{inner.strip()}*" if inner.strip() else ""
        if node.tag == "a" and node.attrs.get("href"):
            target = urljoin(self.base, node.attrs["href"])
            label = inner.strip()
            if not label:
                return ""
            if not target.startswith(("http://", "https://")):
                return label
            return f"[{label.replace('[', '(').replace(']', ')')}]({target.replace(' ', '%20')})"
        if node.tag == "br":
            return "\n"
        if node.tag == "img":
            return ""
        return inner

    def blocks(self, node: Node, depth: int = 0) -> list[str]:
        """Markdown lines for the block content of ``node``."""
        out: list[str] = []
        run: list[Node | str] = []

        def flush() -> None:
            text = "".join(self.inline(c) for c in run).strip()
            if text:
                out.extend([text, ""])
            run.clear()

        for child in node.children:
            if isinstance(child, str) or not self._is_block(child):
                run.append(child)
                continue
            flush()
            out.extend(self.block(child, depth))
        flush()
        return out

    @staticmethod
    def _is_block(node: Node) -> bool:
        return node.tag in _BLOCKS or node.tag in (
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "pre",
            "ul",
            "ol",
            "table",
            "dt",
            "hr",
        )

    def block(self, node: Node, depth: int) -> list[str]:
        if node.tag in _DROP or node.classes & _DROP_CLASSES:
            return []
        tag = node.tag
        if re.fullmatch(r"h[1-6]", tag):
            title = re.sub(r"\s+", " ", self.inline(node)).strip(" ¶#")
            return [f"{'#' * int(tag[1])} {title}", ""] if title else []
        if tag == "pre":
            return [*fenced(text_of(node), _language(node)), ""]
        if tag in ("ul", "ol"):
            return self.listing(node, depth, ordered=tag == "ol")
        if tag == "table":
            return self.table(node)
        if tag == "hr":
            return ["---", ""]
        if tag == "dl" and "py" in node.classes:
            return self.api_entry(node, depth)
        if "admonition" in node.classes:
            return self.admonition(node, depth)
        if tag == "blockquote":
            inner = self.blocks(node, depth)
            return [f"> {ln}" if ln else ">" for ln in inner] + [""]
        if tag == "dt":
            text = self.inline(node).strip()
            return [f"**{text}**", ""] if text else []
        return self.blocks(node, depth)

    def listing(self, node: Node, depth: int, ordered: bool) -> list[str]:
        out: list[str] = []
        number = 0
        for item in node.children:
            if not isinstance(item, Node) or item.tag != "li":
                continue
            number += 1
            lines = [ln for ln in self.blocks(item, depth + 1) if ln.strip()]
            if not lines:
                continue
            bullet = f"{number}. " if ordered else "- "
            out.append("  " * depth + bullet + lines[0].lstrip())
            out.extend(ln if ln.startswith(" ") else "  " * (depth + 1) + ln for ln in lines[1:])
        return [*out, ""] if depth == 0 else out

    def table(self, node: Node) -> list[str]:
        rows: list[list[str]] = []
        for tr in (n for n in _walk(node) if n.tag == "tr"):
            cells = [
                re.sub(r"\s+", " ", self.inline(c)).strip().replace("|", "\\|")
                for c in tr.children
                if isinstance(c, Node) and c.tag in ("td", "th")
            ]
            if cells:
                rows.append(cells)
        if not rows:
            return []
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return [*lines, ""]

    def admonition(self, node: Node, depth: int) -> list[str]:
        title = ""
        body = Node(node.tag, children=[])
        for child in node.children:
            if isinstance(child, Node) and "admonition-title" in child.classes:
                title = text_of(child).strip()
            else:
                body.children.append(child)
        inner = [ln for ln in self.blocks(body, depth)]
        while inner and not inner[-1]:
            inner.pop()
        quoted = [f"> {ln}" if ln else ">" for ln in inner]
        if title:
            quoted.insert(0, f"> **{title}:**")
        return [*quoted, ""]

    def api_entry(self, node: Node, depth: int) -> list[str]:
        out: list[str] = []
        for child in node.children:
            if not isinstance(child, Node):
                continue
            if child.tag == "dt":
                name = child.attrs.get("id") or re.sub(r"\s+", " ", text_of(child)).strip()
                signature = re.sub(r"\s+", " ", text_of(child)).strip()
                signature = re.sub(r"\s*\[source\]\s*", "", signature).strip(" ¶#")
                out += [f"### {name}", "", "```text", signature, "```", ""]
            elif child.tag == "dd":
                out += self.blocks(child, depth)
        return out


@dataclass(frozen=True)
class Converted:
    title: str
    markdown: str
    links: tuple[str, ...]


def convert(html: str, base_url: str) -> Converted:
    """The title, main-content Markdown and outgoing links of one HTML page."""
    root = parse(html)
    title = page_title(root)
    lines = _Renderer(base_url).blocks(main_content(root))
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return Converted(title, text, tuple(links(root, base_url)))
