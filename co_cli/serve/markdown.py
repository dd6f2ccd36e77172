"""An answer's Markdown as the browser view shows it: parsed here by markdown-it-py (CommonMark, tables and
strikethrough; raw HTML off, so markup in an answer stays text), and sent as a tree of plain elements that the
page builds with ``createElement`` and ``textContent``. Nothing of an answer is ever parsed as HTML.

A node is a string (text) or ``{"t": tag, "c": [nodes]}``, with ``"a"`` holding its one attribute where it has
one: a link's ``href`` (http, https or mailto only; any other link is its text), an ordered list's ``start``.
An image is a link to it (the page loads nothing from elsewhere).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

Node = str | dict[str, Any]

_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

SAFE_SCHEMES = ("http", "https", "mailto")
"""The links an answer's Markdown keeps as links."""

_TAGS = {
    "paragraph": "p",
    "heading": None,  # h1 to h6, as written
    "bullet_list": "ul",
    "ordered_list": "ol",
    "list_item": "li",
    "blockquote": "blockquote",
    "em": "em",
    "strong": "strong",
    "s": "s",
    "table": "table",
    "thead": "thead",
    "tbody": "tbody",
    "tr": "tr",
    "th": "th",
    "td": "td",
}
"""Node types that become an element of the same shape; any other type not handled below is its text."""

MAX_DEPTH = 40
"""Nesting kept at most (deeper elements become their text; markdown-it stops nesting blocks sooner): the page
builds the tree recursively."""


def markdown_tree(text: str) -> list[Node]:
    """The nodes ``text`` renders to, in order."""
    return _children(SyntaxTreeNode(_PARSER.parse(text)), 0)


def _children(node: SyntaxTreeNode, depth: int) -> list[Node]:
    out: list[Node] = []
    for child in node.children:
        built = _node(child, depth + 1)
        out.extend(node for node in (built if isinstance(built, list) else [built]) if node != "")
    return out


def _node(node: SyntaxTreeNode, depth: int) -> Node | list[Node]:
    kind = node.type
    if kind == "text":
        return node.content
    if kind == "inline" or (kind == "paragraph" and node.hidden):  # a tight list's paragraphs have no element
        return _children(node, depth)
    if depth > MAX_DEPTH:
        return _plain(node)
    if kind == "softbreak":
        return "\n"
    if kind == "hardbreak":
        return {"t": "br", "c": []}
    if kind == "hr":
        return {"t": "hr", "c": []}
    if kind == "code_inline":
        return {"t": "code", "c": [node.content]}
    if kind in ("fence", "code_block"):
        return {"t": "pre", "c": [{"t": "code", "c": [node.content.removesuffix("\n")]}]}
    if kind == "link":
        return _link(str(node.attrs.get("href", "")), _children(node, depth))
    if kind == "image":
        return _link(str(node.attrs.get("src", "")), [_plain(node) or str(node.attrs.get("src", ""))])
    if kind == "ordered_list" and node.attrs.get("start") not in (None, 1):
        return {"t": "ol", "a": {"start": int(node.attrs["start"])}, "c": _children(node, depth)}
    if kind in _TAGS:
        return {"t": _TAGS[kind] or node.tag, "c": _children(node, depth)}
    return _plain(node)


def _link(href: str, children: list[Node]) -> Node | list[Node]:
    if urlsplit(href).scheme.lower() not in SAFE_SCHEMES:
        return children
    return {"t": "a", "a": {"href": href}, "c": children}


def _plain(node: SyntaxTreeNode) -> str:
    """The text of ``node`` and everything under it."""
    if not node.children:
        return node.content
    return "".join(_plain(child) for child in node.children)
