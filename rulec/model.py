"""The compiler's checked representation of rule files: patterns, result terms, rules, rule sets."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rulec.runtime.dtype import DType

from .callback_check import CallbackScope
from .diagnostics import Loc
from .exprs import Expr

NOARG: Any = type("NoArg", (), {"__repr__": lambda self: "NOARG"})()


@dataclass(eq=False)
class Pat:
    """A pattern node. Every field left at its default matches anything."""

    loc: Loc
    name: str | None = None  # capture name
    ops: frozenset | None = None  # allowed ops; None is any op
    ops_text: str = ""  # the op set as written, for messages
    src: tuple[Pat, ...] | None = None  # patterns for the first sources; None is any sources
    rest: str | None = None  # None: exactly len(src) sources; "": more allowed; "name": more, captured
    rest_loc: Loc | None = None
    dtypes: frozenset | None = None
    arg: Any = NOARG

    def key(self) -> tuple:
        """Structure without positions, for comparing patterns."""
        return (self.name, self.ops, None if self.src is None else tuple(p.key() for p in self.src), self.rest,
                self.dtypes, None if self.arg is NOARG else ("arg", self.arg))

    def shape_key(self) -> tuple:
        """Structure without capture names."""
        return (self.ops, None if self.src is None else tuple(p.shape_key() for p in self.src),
                None if self.rest is None else "...", self.dtypes, None if self.arg is NOARG else ("arg", self.arg))

    def walk(self):
        yield self
        for s in self.src or ():
            yield from s.walk()


# ------------------------------------------------------------------ result terms

@dataclass(eq=False)
class TCapture:
    name: str
    loc: Loc


@dataclass(eq=False)
class TConst:
    value: Any
    loc: Loc


@dataclass(eq=False)
class TExpr:
    expr: Expr
    loc: Loc


@dataclass(eq=False)
class TSplice:
    """`...rest` or `...{expr}` inside a constructor's children: several sources, spliced in.

    `name` is a rest capture; with `expr` set (and `name` empty), the expression's
    value, a sequence of nodes, is spliced instead.
    """

    name: str
    loc: Loc
    expr: Expr | None = None


@dataclass(eq=False)
class TNode:
    op: Any  # Ops
    children: tuple
    loc: Loc
    dtype: DType | Expr | None = None
    arg: Term | None = None  # TConst or TExpr
    tag: Term | None = None


@dataclass(eq=False)
class TReplace:
    """`(replace x :src (...) :arg E :dtype D :tag E)`: x with some fields changed."""

    base: str
    loc: Loc
    children: tuple | None = None
    dtype: DType | Expr | None = None
    arg: Term | None = None
    tag: Term | None = None


Term = TCapture | TConst | TExpr | TSplice | TNode | TReplace


def term_walk(t: Any):
    yield t
    if isinstance(t, (TNode, TReplace)):
        for c in t.children or ():
            yield from term_walk(c)
            if isinstance(c, TSplice) and c.expr is not None:
                yield TExpr(c.expr, c.loc)
        for extra in (t.arg, t.tag, t.dtype):
            if isinstance(extra, (TConst, TExpr)):
                yield extra
            elif isinstance(extra, Expr):
                yield TExpr(extra, extra.loc)


# ------------------------------------------------------------------ rules

@dataclass(eq=False)
class CallSpec:
    module: str
    function: str
    loc: Loc
    params: tuple[str, ...] = ()  # filled by the checker from the function's signature
    wants_ctx: bool = False
    scope: CallbackScope | None = None  # the modules the rule's file may call into


@dataclass(eq=False)
class Rule:
    name: str
    loc: Loc
    match: Pat
    ruleset: str = ""
    file: str = ""
    when: Expr | None = None
    rewrite: Any = None  # a Term
    call: CallSpec | None = None
    captures: dict[str, str] = field(default_factory=dict)  # name -> "node" | "rest"
    capture_locs: dict[str, Loc] = field(default_factory=dict)

    @property
    def pure(self) -> bool:
        return self.call is None


@dataclass(eq=False)
class RuleSetDef:
    name: str
    loc: Loc
    file: str
    doc: str = ""
    include: list[tuple[str, Loc]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def all_rules(self, table: dict[str, RuleSetDef], _seen: tuple[str, ...] = ()) -> list[Rule]:
        """Included rule sets' rules first, in include order, then this set's own rules.

        A set reached twice through includes (a diamond) contributes its rules once, at the first place.
        """
        # depth-first, sources before users, with an explicit stack: include chains may be long. Each set is
        # entered once; one met again (a diamond, or a cycle back to a set being entered) adds nothing new
        out: list[Rule] = []
        entered = set(_seen) | {self.name}
        stack = [(self, iter(self.include))]
        while stack:
            rs, includes = stack[-1]
            for inc, _ in includes:
                if inc in table and inc not in entered:
                    entered.add(inc)
                    stack.append((table[inc], iter(table[inc].include)))
                    break
            else:
                stack.pop()
                out.extend(rs.rules)
        seen: set[int] = set()
        return [r for r in out if not (id(r) in seen or seen.add(id(r)))]


@dataclass(eq=False)
class RuleFile:
    path: str
    rulesets: list[RuleSetDef] = field(default_factory=list)
    callbacks: CallbackScope | None = None  # the top-level `callbacks:` declaration
