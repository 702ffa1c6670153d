"""A forgiving HTML parser: a small element tree with text, for pages nobody validated."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "source", "col", "area", "base"}
BLOCKS = {"p", "div", "section", "article", "main", "blockquote", "dl", "dd", "figure"}
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_CLOSED_BY = {
    "p": BLOCKS | {*HEADINGS, "pre", "ul", "ol", "table", "p", "dl"},
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


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def elements(self) -> list[Node]:
        """The element children, text left out."""
        return [c for c in self.children if isinstance(c, Node)]


class _TreeBuilder(HTMLParser):
    """Builds the tree; an unclosed tag is closed at its parent's end."""

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
        if tag not in VOID and self.depth < MAX_DEPTH:
            self.current = node
            self.depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, [], self.current))

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
    """The element tree of ``html`` under a ``#root`` node."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every element below it, in document order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.elements()))


def text_of(node: Node | str, skip=lambda node: False) -> str:
    """All the text under ``node``, leaving out the elements ``skip`` says to."""
    if isinstance(node, str):
        return node
    if skip(node):
        return ""
    return "".join(text_of(c, skip) for c in node.children)
