"""The compiler's checked representation of rule files: patterns, result terms, rules, rule sets."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rulec.runtime.ir.dtype import DType

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


@dataclass(eq=False)
class TIf:
    """`(if COND THEN ELSE)`: the whole result (or a branch of one) chosen by a condition.

    One rule can then make a several-way decision on a value it computes once (a `let:` binding).
    """

    cond: Expr
    then: Any  # a Term
    orelse: Any
    loc: Loc


Term = TCapture | TConst | TExpr | TSplice | TNode | TReplace | TIf


def term_walk(t: Any):
    yield t
    if isinstance(t, TIf):
        yield TExpr(t.cond, t.cond.loc)
        yield from term_walk(t.then)
        yield from term_walk(t.orelse)
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
    result: str | None = None  # the declared result kind (callback_check.RESULT_KINDS), if declared


@dataclass(eq=False)
class FactSpec:
    """`fact:`: record `key` (or each of `keys`) with `value` (None unless given) into the stage context,
    a dict, as egglog's `set` does for a function; the rule then declines, so later rules still run."""

    loc: Loc
    key: Expr | None = None
    keys: Expr | None = None
    value: Expr | None = None

    def exprs(self) -> list[Expr]:
        return [e for e in (self.key, self.keys, self.value) if e is not None]


@dataclass(eq=False)
class Let:
    """One `let:` binding: `name` is the value of `expr`, computed once per match, in order."""

    name: str
    loc: Loc
    expr: Expr


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
    fact: FactSpec | None = None
    captures: dict[str, str] = field(default_factory=dict)  # name -> "node" | "rest"
    capture_locs: dict[str, Loc] = field(default_factory=dict)
    lets: list[Let] = field(default_factory=list)  # evaluated after the pattern matched, before the guard
    enabled: bool = True  # `enabled: false`: parsed and checked, but not compiled

    @property
    def let_names(self) -> set[str]:
        return {b.name for b in self.lets}

    @property
    def pure(self) -> bool:
        return self.call is None and self.fact is None

    @property
    def kind(self) -> str:
        return "call" if self.call is not None else "fact" if self.fact is not None else "rewrite"


@dataclass(eq=False)
class RuleSetDef:
    name: str
    loc: Loc
    file: str
    doc: str = ""
    include: list[tuple[str, Loc]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def all_rules(self, table: dict[str, RuleSetDef], _seen: tuple[str, ...] = (),
                  include_disabled: bool = False) -> list[Rule]:
        """Included rule sets' rules first, in include order, then this set's own rules.

        A set reached twice through includes (a diamond) contributes its rules once, at the first place.
        Rules switched off (`enabled: false`) are left out unless `include_disabled`.
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
        return [r for r in out if not (id(r) in seen or seen.add(id(r))) and (r.enabled or include_disabled)]


@dataclass(eq=False)
class RuleFile:
    path: str
    rulesets: list[RuleSetDef] = field(default_factory=list)
    callbacks: CallbackScope | None = None  # the top-level `callbacks:` declaration
