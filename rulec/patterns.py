"""Give meaning to s-expressions: `match` text becomes a Pat, `rewrite` text a Term.

Pattern syntax (see docs/rules.md):
  _                 any node            x             any node, captured as x
  OPS               a node whose op is in OPS, any sources
  (OPS p1 p2)       exactly these sources   (OPS p1 ...)   more sources allowed
  (OPS p1 ...rest)  more sources, captured as the tuple `rest`
  x@P               P, captured as x    0, 1.5, True  a CONST with that value
  :dtype D1|D2  :arg LITERAL            constraints, inside a list
OPS is op and group names joined by |, optionally negated with a leading !.
"""
from __future__ import annotations

import difflib
import keyword
import re
from typing import Callable

from rulec.runtime.ir.dtype import DTYPE_BY_NAME, DType
from rulec.runtime.engine.helpers import NAMESPACES
from rulec.runtime.ir.ops import GROUPS, Ops

from .diagnostics import Loc
from .exprs import Expr, ExprError, parse_expr
from .model import NOARG, Pat, TCapture, TConst, TExpr, TIf, TNode, TReplace, TSplice
from .sexpr import SAtom, SBound, SBraced, SItem, SList

Locate = Callable[[int, str], Loc]

CAPTURE_RE = re.compile(r"[a-z_][A-Za-z0-9_]*\Z")
DTYPE_CLASSES: dict[str, frozenset] = {
    "ints": frozenset(d for d in DTYPE_BY_NAME.values() if d.kind in ("int", "uint", "index")),
    "sints": frozenset(d for d in DTYPE_BY_NAME.values() if d.kind in ("int", "index")),
    "uints": frozenset(d for d in DTYPE_BY_NAME.values() if d.kind == "uint"),
    "floats": frozenset(d for d in DTYPE_BY_NAME.values() if d.kind == "float"),
}


class PatternError(Exception):
    def __init__(self, message: str, loc: Loc, length: int = 1):
        super().__init__(message)
        self.loc = loc
        self.length = length


def parse_literal(text: str):
    """The value of a literal atom, or NOARG if the atom is not a literal."""
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    try:
        return int(text, 0)
    except ValueError:
        pass
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?|[-+]?inf", text):
        return float(text)
    return NOARG


def parse_opset(text: str, loc: Loc) -> frozenset:
    negate = text.startswith("!")
    body = text[1:] if negate else text
    if not body:
        raise PatternError("expected an op or group name", loc)
    members: set = set()
    offset = 1 if negate else 0
    for part in body.split("|"):
        if part in Ops.__members__:
            members.add(Ops[part])
        elif part in GROUPS:
            members |= GROUPS[part]
        else:
            hint = _suggest(part)
            raise PatternError(f"unknown op or group '{part}'{hint}", loc.shifted(offset), len(part))
        offset += len(part) + 1
    return frozenset(GROUPS["All"] - members) if negate else frozenset(members)


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, list(Ops.__members__) + list(GROUPS), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def parse_dtypes(text: str, loc: Loc) -> frozenset:
    out: set = set()
    offset = 0
    for part in text.split("|"):
        if part in DTYPE_BY_NAME:
            out.add(DTYPE_BY_NAME[part])
        elif part in DTYPE_CLASSES:
            out |= DTYPE_CLASSES[part]
        else:
            raise PatternError(_unknown_dtype(part, classes=True), loc.shifted(offset), len(part))
        offset += len(part) + 1
    return frozenset(out)


def _unknown_dtype(name: str, classes: bool) -> str:
    known = list(DTYPE_BY_NAME) + (list(DTYPE_CLASSES) if classes else [])
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"unknown dtype '{name}' (did you mean '{close[0]}'?)"
    listed = f"dtypes: {', '.join(DTYPE_BY_NAME)}" + (f"; classes: {', '.join(DTYPE_CLASSES)}" if classes else "")
    return f"unknown dtype '{name}' ({listed})"


class PatternParser:
    """Parses one rule's match and rewrite text; `locate` maps text offsets to file positions."""

    def __init__(self, locate: Locate):
        self.locate = locate

    def loc(self, item: SItem, token: str = "") -> Loc:
        text = token or (item.text if isinstance(item, (SAtom, SBraced)) else
                         item.name if isinstance(item, SBound) else "(")
        return self.locate(item.offset, text)

    # ------------------------------------------------------------ patterns
    def pattern(self, item: SItem) -> Pat:
        if isinstance(item, SBound):
            self._check_capture(item.name, self.locate(item.offset, item.name))
            inner = self.pattern(item.item)
            inner.name, inner.loc = item.name, self.locate(item.offset, item.name + "@")
            return inner
        if isinstance(item, SBraced):
            raise PatternError("expressions are not patterns; use a `when` guard", self.loc(item))
        if isinstance(item, SList):
            return self._list_pattern(item)
        text = item.text
        loc = self.loc(item)
        if text == "_":
            return Pat(loc)
        if text.startswith("..."):
            raise PatternError("'...' may only follow the sources of a list pattern", loc, len(text))
        lit = parse_literal(text)
        if lit is not NOARG:
            return Pat(loc, ops=frozenset({Ops.CONST}), ops_text="CONST", arg=lit)
        if "@" in text:
            name, _, rest = text.partition("@")
            self._check_capture(name, loc)
            if not rest:
                raise PatternError(f"'{name}@' must be followed directly by a pattern, as in {name}@(ADD a b)", loc,
                                   len(text))
            inner = self.pattern(SAtom(rest, item.offset + len(name) + 1))
            if inner.name is not None:  # `x@y` would silently drop y
                raise PatternError(f"'{text}' names one node twice: write {name}, or {name}@OP", loc, len(text))
            inner.name = name
            inner.loc = loc
            return inner
        if CAPTURE_RE.match(text):
            self._check_capture(text, loc)
            return Pat(loc, name=text)
        return Pat(loc, ops=parse_opset(text, loc), ops_text=text)

    def _check_capture(self, name: str, loc: Loc) -> None:
        if not CAPTURE_RE.match(name) or name == "_":
            raise PatternError(f"invalid capture name '{name}': captures are lowercase identifiers", loc, len(name))
        # guards must be able to name the capture
        if keyword.iskeyword(name) or name in NAMESPACES:
            what = "a Python keyword" if keyword.iskeyword(name) else f"the {name} namespace of expressions"
            raise PatternError(f"'{name}' cannot be a capture name: it is {what}", loc, len(name))

    def _list_pattern(self, item: SList) -> Pat:
        items = list(item.items)
        loc = self.loc(item)
        if not items:
            raise PatternError("empty list pattern: write (OP ...)", loc)
        head = items[0]
        if not isinstance(head, SAtom) or head.text.startswith(":"):
            raise PatternError("a list pattern starts with an op, a group or an op set", self.loc(head))
        name = None
        text = head.text
        if "@" in text:
            raise PatternError("write the capture before the list: x@(OP ...)", self.loc(head), len(text))
        pat = Pat(loc, ops=parse_opset(text, self.loc(head)), ops_text=text, src=())
        srcs: list[Pat] = []
        i = 1
        while i < len(items):
            it = items[i]
            if isinstance(it, SAtom) and it.text.startswith(":"):
                if i + 1 >= len(items):
                    raise PatternError(f"{it.text} needs a value", self.loc(it), len(it.text))
                self._keyword(pat, it, items[i + 1])
                i += 2
                continue
            if isinstance(it, SAtom) and it.text.startswith("..."):
                if pat.rest is not None:
                    raise PatternError("only one '...' per list", self.loc(it), len(it.text))
                rest_name = it.text[3:]
                if rest_name:
                    self._check_capture(rest_name, self.loc(it))
                pat.rest, pat.rest_loc = rest_name, self.loc(it)
                i += 1
                continue
            if pat.rest is not None:
                raise PatternError("sources after '...' are not allowed", self.loc(it))
            srcs.append(self.pattern(it))
            i += 1
        pat.src = tuple(srcs)
        del name
        return pat

    def _keyword(self, pat: Pat, key: SAtom, value: SItem) -> None:
        if key.text == ":dtype":
            if not isinstance(value, SAtom):
                raise PatternError(":dtype takes dtype names joined by |", self.loc(value))
            pat.dtypes = parse_dtypes(value.text, self.loc(value))
        elif key.text == ":arg":
            lit = parse_literal(value.text) if isinstance(value, SAtom) else NOARG
            if lit is NOARG:
                raise PatternError(":arg in a pattern takes a literal; test anything else in `when`", self.loc(value))
            pat.arg = lit
        else:
            raise PatternError(f"unknown pattern keyword {key.text} (expected :dtype or :arg)", self.loc(key),
                               len(key.text))

    # ------------------------------------------------------------ terms
    def term(self, item: SItem, allow_splice: bool = False):
        if isinstance(item, SBound):
            raise PatternError("captures (x@...) belong in match patterns, not in results",
                               self.locate(item.offset, item.name))
        if isinstance(item, SBraced):
            return TExpr(self.expr(item.text, item.offset), self.loc(item))
        if isinstance(item, SList):
            return self._list_term(item)
        text, loc = item.text, self.loc(item)
        if text.startswith("..."):
            if not allow_splice:
                raise PatternError("'...rest' can only be spliced into the sources of a node", loc, len(text))
            if not CAPTURE_RE.match(text[3:]):
                raise PatternError("write the name of a rest capture after '...'", loc, len(text))
            return TSplice(text[3:], loc)
        lit = parse_literal(text)
        if lit is not NOARG:
            return TConst(lit, loc)
        if CAPTURE_RE.match(text) and text != "_":
            return TCapture(text, loc)
        if text[:1].isupper() and "." not in text and "[" not in text:
            raise PatternError(f"'{text}' is an op: build a node with ({text} ...)", loc, len(text))
        return TExpr(self.expr(text, item.offset), loc)

    def expr(self, text: str, offset: int) -> Expr:
        def at(off: int, token: str = "") -> Loc:
            return self.locate(offset + off, token)

        try:
            return parse_expr(text, at(0, text), at)
        except ExprError as e:
            raise PatternError(str(e), at(e.offset, text[e.offset:e.offset + e.length]), e.length) from None

    def _list_term(self, item: SList):
        items = list(item.items)
        loc = self.loc(item)
        if not items or not isinstance(items[0], SAtom):
            raise PatternError("a result list starts with an op name or `replace`", loc)
        head = items[0]
        if head.text == "if":
            return self._if_term(item, items)
        if head.text == "replace":
            if len(items) < 2 or not isinstance(items[1], SAtom) or not CAPTURE_RE.match(items[1].text):
                raise PatternError("replace needs a capture: (replace x :src (...))", self.loc(head))
            node = TReplace(items[1].text, self.loc(items[1]))
            rest = items[2:]
        else:
            if head.text not in Ops.__members__:
                if head.text in GROUPS or "|" in head.text or head.text.startswith("!"):
                    raise PatternError(f"a result must name one op, not '{head.text}'", self.loc(head),
                                       len(head.text))
                raise PatternError(f"unknown op '{head.text}'{_suggest(head.text)}", self.loc(head), len(head.text))
            node = TNode(Ops[head.text], (), loc)
            rest = items[1:]
        children: list = []
        i = 0
        while i < len(rest):
            it = rest[i]
            if isinstance(it, SAtom) and it.text.startswith(":"):
                if i + 1 >= len(rest):
                    raise PatternError(f"{it.text} needs a value", self.loc(it), len(it.text))
                self._term_keyword(node, it, rest[i + 1])
                i += 2
                continue
            if isinstance(node, TReplace):
                raise PatternError("replace takes keywords only: :src, :arg, :dtype, :tag", self.loc(it))
            end = self._splice_end(rest, i)
            children.append(self.term(it, allow_splice=True) if end == i + 1 else self._splice_expr(rest[i], rest[i + 1]))
            i = end
        if isinstance(node, TNode):
            node.children = tuple(children)
        return node

    def _if_term(self, item: SList, items: list) -> TIf:
        """`(if COND THEN ELSE)`: COND is an expression ({...} or a name); THEN and ELSE are results."""
        if len(items) != 4:
            raise PatternError(f"if takes a condition and two results: (if cond then else), got {len(items) - 1} "
                               f"item{'s' * (len(items) != 2)}", self.loc(items[0], "if"), 2)
        c = items[1]
        if isinstance(c, SBraced):
            cond = self.expr(c.text, c.offset)
        elif isinstance(c, SAtom) and not c.text.startswith((":", "...")):
            cond = self.expr(c.text, c.offset)
        else:
            raise PatternError("the condition of if is an expression: {expr} or a name", self.loc(c))
        return TIf(cond, self.term(items[2]), self.term(items[3]), self.loc(item))

    @staticmethod
    def _splice_end(items: list, i: int) -> int:
        """Where the child starting at items[i] ends: `...{expr}` is two reader items."""
        it = items[i]
        if isinstance(it, SAtom) and it.text == "..." and i + 1 < len(items) and isinstance(items[i + 1], SBraced) \
                and items[i + 1].offset == it.offset + 4:
            return i + 2
        return i + 1

    def _splice_expr(self, dots: SAtom, braced: SBraced) -> TSplice:
        return TSplice("", self.loc(dots, "..."), self.expr(braced.text, braced.offset))

    def _children(self, items: list) -> tuple:
        out: list = []
        i = 0
        while i < len(items):
            end = self._splice_end(items, i)
            out.append(self.term(items[i], allow_splice=True) if end == i + 1
                       else self._splice_expr(items[i], items[i + 1]))
            i = end
        return tuple(out)

    def _term_keyword(self, node, key: SAtom, value: SItem) -> None:
        k = key.text
        if k == ":dtype":
            if isinstance(value, SAtom) and value.text in DTYPE_BY_NAME:
                node.dtype = DTYPE_BY_NAME[value.text]
            elif isinstance(value, SList):
                raise PatternError(":dtype takes a dtype name or an expression", self.loc(value))
            elif isinstance(value, SAtom) and value.text.isidentifier():
                # a bare name can only be a dtype: captures are nodes, not dtypes
                msg = _unknown_dtype(value.text, classes=False)
                if "did you mean" not in msg and CAPTURE_RE.match(value.text):
                    msg = f"unknown dtype '{value.text}' (for the dtype of a captured node, write {value.text}.dtype)"
                raise PatternError(msg, self.loc(value), len(value.text))
            else:
                node.dtype = self.expr(value.text, value.offset)
        elif k in (":arg", ":tag"):
            if isinstance(value, SList):
                raise PatternError(f"{k} takes a literal or an expression, not a node; write a tuple as "
                                   f"{{(1, 2)}}", self.loc(value))
            t = self.term(value)
            if not isinstance(t, (TConst, TExpr, TCapture)):
                raise PatternError(f"{k} takes a literal or an expression", self.loc(value))
            if isinstance(t, TCapture):
                t = TExpr(self.expr(t.name, value.offset), t.loc)
            setattr(node, k[1:], t)
        elif k == ":src" and isinstance(node, TReplace):
            if isinstance(value, SBraced):
                # `:src {expr}`: the expression's value is the whole source tuple
                node.children = (TSplice("", self.loc(value), self.expr(value.text, value.offset)),)
            elif not isinstance(value, SList):
                raise PatternError(":src takes a parenthesized list of sources, or {an expression}", self.loc(value))
            else:
                node.children = self._children(list(value.items))
        else:
            allowed = ":src, :arg, :dtype, :tag" if isinstance(node, TReplace) else ":arg, :dtype, :tag"
            raise PatternError(f"unknown keyword {k} (expected {allowed})", self.loc(key), len(k))


def is_dtype(x) -> bool:
    return isinstance(x, DType)
