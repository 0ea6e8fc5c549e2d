"""YAML with positions: every mapping, sequence and scalar keeps its file:line:col.

Scalars also map offsets inside their text back to file positions, so that a
token deep inside an s-expression can be reported exactly where it is written,
whether the scalar is plain, quoted or a `|` block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from .diagnostics import CompileError, Diagnostic, Loc

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class YNode:
    """A YAML value with its position. `value` is dict[str, YNode], list[YNode] or a scalar."""

    value: Any
    loc: Loc
    # for scalars: the raw file text the scalar spans, and how it was written
    raw: str = ""
    raw_start: tuple[int, int] = (0, 0)  # 0-based (line, col) of the raw text
    style: str | None = None
    key_locs: dict[str, Loc] | None = None

    def get(self, key: str) -> YNode | None:
        return self.value.get(key) if isinstance(self.value, dict) else None

    def loc_at(self, offset: int, token: str = "") -> Loc:
        """The file position of character `offset` of this scalar's text."""
        text = self.value if isinstance(self.value, str) else str(self.value)
        line0, col0 = self.raw_start
        if "\n" not in self.raw:
            if self.style in ("'", '"'):
                return Loc(self.loc.file, line0 + 1, col0 + 2 + _unescaped_offset(self.raw[1:], self.style, offset))
            return Loc(self.loc.file, line0 + 1, col0 + 1 + offset)
        if self.style == "|":
            # literal block: value line k is raw line k+1, minus the block's indentation. That indentation
            # is not always the first line's: `|2` allows more-indented first lines.
            body = self.raw.split("\n")[1:]
            values = text.split("\n")
            indent = next((len(r) - len(v) for r, v in zip(body, values) if v.strip()), 0)
            k = text.count("\n", 0, offset)
            j = offset - (text.rfind("\n", 0, offset) + 1)
            return Loc(self.loc.file, line0 + 2 + k, indent + j + 1)
        # folded or multi-line plain scalars: find the same occurrence of the token in the raw text
        needle = token or text[offset:offset + 1]
        nth = text.count(needle, 0, offset) if needle else 0
        pos = -1
        for _ in range(nth + 1):
            pos = self.raw.find(needle, pos + 1)
            if pos < 0:
                return self.loc
        before = self.raw[:pos]
        k = before.count("\n")
        col = (col0 + pos) if k == 0 else (pos - before.rfind("\n") - 1)
        return Loc(self.loc.file, line0 + 1 + k, col + 1)


def _unescaped_offset(raw: str, quote: str, offset: int) -> int:
    """The offset into the raw text of a one-line quoted scalar (after its opening quote) of value char `offset`."""
    i = 0
    for _ in range(offset):
        if i >= len(raw):
            break
        if quote == "'" and raw.startswith("''", i):
            i += 2
        elif quote == '"' and raw[i] == "\\":
            code = raw[i + 1:i + 2]
            i += 2 + {"x": 2, "u": 4, "U": 8}.get(code, 0)
        else:
            i += 1
    return i


class _Builder:
    def __init__(self, filename: str, text: str):
        self.filename = filename
        self.lines = text.split("\n")
        self.constructor = SafeConstructor()

    def loc(self, mark) -> Loc:
        return Loc(self.filename, mark.line + 1, mark.column + 1)

    def raw(self, start, end) -> str:
        if start.line == end.line:
            return self.lines[start.line][start.column:end.column]
        parts = [self.lines[start.line][start.column:]]
        parts += self.lines[start.line + 1:end.line]
        parts.append(self.lines[end.line][:end.column] if end.line < len(self.lines) else "")
        return "\n".join(parts)

    def build(self, node) -> YNode:
        if isinstance(node, yaml.MappingNode):
            out: dict[str, YNode] = {}
            key_locs: dict[str, Loc] = {}
            for k, v in node.value:
                key = self.constructor.construct_object(k)
                if not isinstance(key, str):
                    key = str(key)
                if key in out:
                    raise CompileError([Diagnostic("error", self.loc(k.start_mark),
                                                   f"duplicate key {key!r} (first at line {key_locs[key].line})",
                                                   len(key))])
                out[key] = self.build(v)
                key_locs[key] = self.loc(k.start_mark)
            return YNode(out, self.loc(node.start_mark), key_locs=key_locs)
        if isinstance(node, yaml.SequenceNode):
            return YNode([self.build(v) for v in node.value], self.loc(node.start_mark))
        value = self.constructor.construct_object(node)
        return YNode(value, self.loc(node.start_mark), raw=self.raw(node.start_mark, node.end_mark),
                     raw_start=(node.start_mark.line, node.start_mark.column), style=node.style)


def load_yaml(filename: str, text: str) -> YNode | None:
    """Parse one YAML document; syntax errors become diagnostics with the file position."""
    try:
        _check_nesting(filename, text)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        if "nesting depth" in str(e.problem) and e.problem_mark is not None:
            # newer libyaml scans ahead and stops at its own limit (1000) before the parser reaches ours
            mark = e.problem_mark
            raise CompileError([Diagnostic("error", Loc(filename, mark.line + 1, mark.column + 1),
                                           f"invalid YAML: nested deeper than {MAX_NESTING} levels")]) from None
        raise CompileError([_yaml_error(filename, text, e)]) from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow (control characters, ...)
        line = text.count("\n", 0, e.position)
        col = e.position - (text.rfind("\n", 0, e.position) + 1)
        raise CompileError([Diagnostic("error", Loc(filename, line + 1, col + 1),
                                       f"invalid YAML: character U+{_codepoint(e.character):04X} is not allowed ({e.reason})")]) from None
    if node is None:
        return None
    _check_aliases(filename, text, node)
    try:
        return _Builder(filename, text).build(node)
    except yaml.MarkedYAMLError as e:  # e.g. an unknown tag such as `!foo`
        raise CompileError([_yaml_error(filename, text, e)]) from None


def _codepoint(c: int | str) -> int:
    return c if isinstance(c, int) else ord(c[:1] or "\0")


# Mappings and sequences inside each other. The YAML composer recurses once per level (libyaml's in C:
# a file nested 100 000 deep crashes the interpreter), so the depth is measured on the flat event
# stream before anything is composed. Rule files need about five levels.
MAX_NESTING = 100


def _check_nesting(filename: str, text: str) -> None:
    depth = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_NESTING:
                loc = Loc(filename, ev.start_mark.line + 1, ev.start_mark.column + 1)
                raise CompileError([Diagnostic("error", loc, f"invalid YAML: nested deeper than {MAX_NESTING} levels")])
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


# Nodes that aliases may add to a file. An alias is a reference, so composing is cheap, but each
# use is expanded into its own YNode: nine nested aliases of nine ("billion laughs") would be 10**9.
ALIAS_BUDGET = 10_000


def _check_aliases(filename: str, text: str, root: yaml.Node) -> None:
    """Refuse a file whose aliases expand past ALIAS_BUDGET extra nodes, or refer to their own anchor."""
    expanded, distinct = _expanded_size(root, limit=10 * ALIAS_BUDGET)
    if expanded is None:
        why = "an alias refers to a node that contains it"
    elif expanded > distinct + ALIAS_BUDGET:
        why = f"aliases expand this file by more than {ALIAS_BUDGET} nodes"
    else:
        return
    mark = next((ev.start_mark for ev in yaml.parse(text, Loader=_Loader) if isinstance(ev, yaml.AliasEvent)), None)
    loc = Loc(filename, mark.line + 1, mark.column + 1) if mark is not None else None
    raise CompileError([Diagnostic("error", loc, f"invalid YAML: {why}")])


def _expanded_size(root: yaml.Node, limit: int) -> tuple[int | None, int]:
    """(nodes of the tree with every alias expanded, capped near `limit`; None for a cycle), distinct nodes."""
    def kids(n: yaml.Node) -> list:
        if isinstance(n, yaml.MappingNode):
            return [x for pair in n.value for x in pair]
        return list(n.value) if isinstance(n, yaml.SequenceNode) else []

    sizes: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose subtree is being sized: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # iterative: the nesting depth is the file's to choose
        node, done = stack.pop()
        k = id(node)
        if done:
            open_.discard(k)
            sizes[k] = min(limit + 1, 1 + sum(sizes[id(c)] for c in kids(node)))
        elif k in open_:
            return None, len(sizes)
        elif k not in sizes:
            open_.add(k)
            stack.append((node, True))
            stack.extend((c, False) for c in kids(node) if id(c) not in sizes)
    return sizes[id(root)], len(sizes)


def _yaml_error(filename: str, text: str, e: yaml.MarkedYAMLError) -> Diagnostic:
    message = f"invalid YAML: {e.problem or e.context}"
    mark = e.problem_mark or e.context_mark
    if mark is None:
        return Diagnostic("error", None, message)
    lines = text.split("\n")
    line, col = mark.line, mark.column
    end = len(text.rstrip())
    if _index(lines, line, col) >= end:
        # the file ended inside something: point at where it was opened, else at the end of the text
        ctx = e.context_mark
        if e.context and ctx is not None and _index(lines, ctx.line, ctx.column) < end:
            line, col = ctx.line, ctx.column
            message += f" ({e.context} that starts here)"
        else:
            line = text[:end].count("\n")
            col = len(lines[line]) if line < len(lines) else 0
            message += " at the end of the file"
    elif line < len(lines) and lines[line][col:col + 1] == "\t":
        message += " (a tab: YAML indents with spaces)"
    elif e.context and e.context_mark is not None and e.context_mark.line != line:
        message += f" ({e.context} at line {e.context_mark.line + 1})"
    return Diagnostic("error", Loc(filename, line + 1, col + 1), message)


def _index(lines: list[str], line: int, col: int) -> int:
    return sum(len(ln) + 1 for ln in lines[:line]) + col
