"""SGF (FF[4]) syntax: text -> game trees of nodes and property values; value escaping.

Only the grammar, no game: collections, game trees, nodes, properties, ``[...]`` values
with their escapes and soft line breaks, the file's charset. What the properties mean
(GM, SZ, moves, results) and the conversion to zeroforge's games is ``sgf.py``'s.

The parser is our own and small: strict about syntax, so a malformed file raises
``SgfError`` naming the game and the character offset.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

__all__ = ["Node", "SgfError", "decode", "escape", "parse_collection", "text_value"]

_SPACE = re.compile(r"\s*")
_IDENT = re.compile(r"[A-Za-z]+")


class SgfError(ValueError):
    """Malformed or unsupported SGF; the one-line message says what and where."""


@dataclass
class Node:
    """One ``;`` node: its properties (identifier -> values, escapes resolved) and the
    nodes that follow it, the main line first."""

    offset: int
    """Offset of the ``;`` in the text."""
    props: dict[str, list[str]] = field(default_factory=dict)
    where: dict[str, int] = field(default_factory=dict)
    """Offset of each property's name in the text, for error messages."""
    children: list[Node] = field(default_factory=list)


@dataclass
class _Frame:
    """An open '(' while parsing: where it hangs and what it has seen so far."""

    parent: Node | None
    opened_at: int
    has_node: bool = False
    has_variation: bool = False


class _Parser:
    """Recursive-descent SGF parser, iterative over game trees because some programs nest
    every move in its own variation, deeper than Python's recursion limit."""

    def __init__(self, text: str) -> None:
        # A byte-order mark is not SGF but editors add it; it must not count as junk.
        self.text = text[1:] if text.startswith("\ufeff") else text
        self.pos = 0
        self.game = 0

    def fail(self, what: str, at: int | None = None) -> SgfError:
        at = self.pos if at is None else at
        where = f"game {self.game}, offset {at}" if self.game else f"offset {at}"
        return SgfError(f"SGF {where}: {what}")

    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def collection(self) -> list[Node]:
        roots = []
        while True:
            self.skip_space()
            if self.pos >= len(self.text):
                break
            if self.text[self.pos] != "(":
                raise self.fail(f"expected '(' to start a game tree, found {self.text[self.pos]!r}")
            self.game += 1
            roots.append(self.game_tree())
        if not roots:
            raise self.fail("no game tree found")
        return roots

    def game_tree(self) -> Node:
        text = self.text
        stack: list[_Frame] = []
        root: Node | None = None
        current: Node | None = None  # last node of the innermost open sequence
        while True:
            self.skip_space()
            if self.pos >= len(text):
                raise self.fail(
                    f"end of text inside the game tree opened at offset {stack[-1].opened_at} "
                    "(missing ')')"
                )
            c = text[self.pos]
            if c == "(":
                if stack:
                    if not stack[-1].has_node:
                        raise self.fail("variation before any node of its game tree")
                    stack[-1].has_variation = True
                stack.append(_Frame(current, self.pos))
                self.pos += 1
            elif c == ";":
                top = stack[-1]
                if top.has_variation:
                    raise self.fail("node after a variation (nodes must come first)")
                node = Node(self.pos)
                if current is None:
                    root = node
                else:
                    current.children.append(node)
                current = node
                top.has_node = True
                self.pos += 1
                self.properties(node)
            elif c == ")":
                top = stack.pop()
                if not top.has_node:
                    raise self.fail("empty game tree '()'")
                current = top.parent
                self.pos += 1
                if not stack:
                    assert root is not None
                    return root
            else:
                raise self.fail(f"unexpected {c!r} (expected ';', '(' or ')')")

    def properties(self, node: Node) -> None:
        text = self.text
        while True:
            self.skip_space()
            m = _IDENT.match(text, self.pos)
            if m is None:
                return
            at = self.pos
            # FF[3] allowed long names like "AddBlack"; only the capitals are the identifier.
            ident = "".join(ch for ch in m.group() if ch.isupper())
            if not ident:
                raise self.fail(f"property name {m.group()!r} has no capital letter", at)
            self.pos = m.end()
            values = []
            while True:
                self.skip_space()
                if self.pos < len(text) and text[self.pos] == "[":
                    values.append(self.value())
                else:
                    break
            if not values:
                raise self.fail(f"property {ident} has no value", at)
            # A repeated property in one node is illegal FF[4] but common; its values add up.
            node.props.setdefault(ident, []).extend(values)
            node.where.setdefault(ident, at)

    def value(self) -> str:
        """One ``[...]`` value with escapes resolved: ``\\x`` -> ``x``, ``\\``+newline -> ""."""
        text = self.text
        start = self.pos
        i = start + 1
        parts = []
        while True:
            close = text.find("]", i)
            if close < 0:
                raise self.fail("property value never closed (missing ']')", start)
            slash = text.find("\\", i, close)
            if slash < 0:
                parts.append(text[i:close])
                self.pos = close + 1
                return "".join(parts)
            parts.append(text[i:slash])
            escaped = text[slash + 1:slash + 2]
            if escaped in ("\n", "\r"):
                # Soft line break: the escaped newline (\n, \r, \r\n or \n\r) disappears.
                i = slash + 2
                after = text[i:i + 1]
                if after in ("\n", "\r") and after != escaped:
                    i += 1
            else:
                parts.append(escaped)
                i = slash + 2


def parse_collection(text: str) -> list[Node]:
    """The root node of each game tree of an SGF collection; SgfError if malformed."""
    return _Parser(text).collection()


def text_value(value: str, simple: bool) -> str:
    """FF[4] Text (or SimpleText) value: newlines normalised, other white space as spaces."""
    v = value.replace("\r\n", "\n").replace("\n\r", "\n").replace("\r", "\n")
    v = v.replace("\t", " ").replace("\v", " ").replace("\f", " ")
    return v.replace("\n", " ") if simple else v


def escape(text: str, simple: bool = False) -> str:
    """``text`` as the inside of a ``[...]`` value (SimpleText: on one line)."""
    if simple:
        text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return text.replace("\\", "\\\\").replace("]", "\\]")


def decode(data: bytes) -> str:
    """SGF bytes as text: UTF-8 if it is, else the charset named by CA, else Latin-1."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    m = re.search(rb"CA\s*\[([^\]]*)\]", data)
    if m:
        try:
            return data.decode(codecs.lookup(m.group(1).decode("ascii").strip()).name,
                               errors="replace")
        except (LookupError, UnicodeDecodeError):
            pass
    return data.decode("latin-1")  # never fails: every byte is a character
