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


# Lists may nest this deep: far beyond any real pattern, and shallow enough that the compiler's
# recursive passes over patterns (checks, variants, code generation) stay within Python's stack.
MAX_NESTING = 100


def _read_braced(text: str, pos: int) -> tuple[SBraced, int]:
    """The `{...}` item whose `{` is at `pos`, and the position after its `}`."""
    depth, j = 1, pos + 1
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    if depth:
        raise SexprError("unclosed '{'", pos)
    return SBraced(text[pos + 1:j - 1], pos + 1), j


def _read_seq(text: str, pos: int, closer: int | None) -> tuple[list[SItem], int]:
    """Items up to the `)` that closes the list opened at `closer` (None: up to the end of the text).

    Nested lists are read with an explicit stack of open lists, not by recursion.
    """
    # each open list: the offset of its '(', the name of a `name@(` in front of it (or None), its items
    open_lists: list[tuple[int | None, SAtom | None, list[SItem]]] = [(closer, None, [])]
    while True:
        pos = _skip_ws(text, pos)
        opened_at, bound, items = open_lists[-1]
        if pos >= len(text):
            if opened_at is not None:
                raise SexprError("unclosed '('", opened_at)
            return items, pos
        c = text[pos]
        if c == ")":
            if opened_at is None:
                raise SexprError("unexpected ')'", pos)
            pos += 1
            if len(open_lists) == 1:
                return items, pos
            open_lists.pop()
            done: SItem = SList(tuple(items), opened_at)
            if bound is not None:
                done = SBound(bound.text[:-1], done, bound.offset)
            open_lists[-1][2].append(done)
        elif c == "(":
            pos = _open_list(open_lists, pos, None)
        elif c == "{":
            item, pos = _read_braced(text, pos)
            items.append(item)
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
            if atom.text.endswith("@") and j < len(text) and text[j] == "(":
                pos = _open_list(open_lists, j, atom)
            elif atom.text.endswith("@") and j < len(text) and text[j] == "{":
                item, pos = _read_braced(text, j)
                items.append(SBound(atom.text[:-1], item, atom.offset))
            else:
                items.append(atom)
                pos = j


def _open_list(open_lists: list, pos: int, bound: SAtom | None) -> int:
    """Start the list whose `(` is at `pos`; the position after the `(`."""
    if len(open_lists) > MAX_NESTING:
        raise SexprError(f"pattern nested too deep (limit {MAX_NESTING})", pos)
    open_lists.append((pos, bound, []))
    return pos + 1
