"""The s-expression reader used for `match` and `rewrite` text.

It only splits text into lists, atoms and `{braced}` expressions, keeping the
offset of every item; patterns.py gives them meaning.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SAtom:
    text: str
    offset: int


@dataclass(frozen=True)
class SBraced:
    """`{ expression }`: its text without the braces; offset is of the first inner character."""

    text: str
    offset: int


@dataclass(frozen=True)
class SList:
    items: tuple
    offset: int


@dataclass(frozen=True)
class SBound:
    """`name@(...)`: a list (or braced item) with a capture name written in front of it."""

    name: str
    item: SList | SBraced
    offset: int


SItem = SAtom | SBraced | SList | SBound


class SexprError(Exception):
    def __init__(self, message: str, offset: int, length: int = 1):
        super().__init__(message)
        self.offset = offset
        self.length = length


_DELIMS = set("(){}")


def read_sexpr(text: str) -> SItem:
    """Read exactly one item from `text`."""
    items, pos = _read_seq(text, 0, None)
    if not items:
        raise SexprError("empty pattern", 0)
    if len(items) > 1:
        raise SexprError("expected one term; wrap several in parentheses", items[1].offset)
    return items[0]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text):
        c = text[pos]
        if c.isspace():
            pos += 1
        elif c == ";":  # comment to end of line
            while pos < len(text) and text[pos] != "\n":
                pos += 1
        else:
            break
    return pos


def _read_one(text: str, pos: int) -> tuple[SList | SBraced, int]:
    """Read the list or braced item starting exactly at `pos`."""
    if text[pos] == "(":
        inner, end = _read_seq(text, pos + 1, pos)
        return SList(tuple(inner), pos), end
    depth, j = 1, pos + 1
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    if depth:
        raise SexprError("unclosed '{'", pos)
    return SBraced(text[pos + 1:j - 1], pos + 1), j


def _read_seq(text: str, pos: int, closer: int | None) -> tuple[list[SItem], int]:
    items: list[SItem] = []
    while True:
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            if closer is not None:
                raise SexprError("unclosed '('", closer)
            return items, pos
        c = text[pos]
        if c == ")":
            if closer is None:
                raise SexprError("unexpected ')'", pos)
            return items, pos + 1
        if c == "(":
            inner, end = _read_seq(text, pos + 1, pos)
            items.append(SList(tuple(inner), pos))
            pos = end
        elif c == "{":
            depth, j = 1, pos + 1
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise SexprError("unclosed '{'", pos)
            items.append(SBraced(text[pos + 1:j - 1], pos + 1))
            pos = j
        elif c == "}":
            raise SexprError("unexpected '}'", pos)
        elif c in "\"'":
            j = text.find(c, pos + 1)
            if j < 0:
                raise SexprError("unclosed string", pos)
            items.append(SAtom(text[pos:j + 1], pos))
            pos = j + 1
        else:
            j = pos
            depth = 0  # brackets inside an atom, as in r.src[0]
            while j < len(text) and (depth or not (text[j].isspace() or text[j] in _DELIMS)):
                depth += {"[": 1, "]": -1}.get(text[j], 0)
                j += 1
            atom = SAtom(text[pos:j], pos)
            if atom.text.endswith("@") and j < len(text) and text[j] in "({":
                sub_items, end = _read_one(text, j)
                items.append(SBound(atom.text[:-1], sub_items, pos))
                pos = end
                continue
            items.append(atom)
            pos = j
