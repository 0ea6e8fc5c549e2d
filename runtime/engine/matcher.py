"""The runtime form of a compiled rule set: rule metadata plus a dispatch table by root op."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from rulec.runtime.ir.ops import Ops

RuleFn = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class RuleInfo:
    """Where a rule came from, for tracing and error messages."""

    name: str
    ruleset: str
    file: str
    line: int
    col: int = 1
    kind: str = "rewrite"  # "rewrite" (declarative) or "call" (Python callback)

    @property
    def loc(self) -> str:
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.ruleset}/{self.name} ({self.loc})"


class RuleError(RuntimeError):
    """An exception raised while one rule ran (its guard, a computed value, its callback, or a result of the
    wrong type). The message starts with the rule's `file:line` and name; `__cause__` is the original error,
    whose type the RuleError also has (see `rule_error`), so `except ZeroDivisionError` still catches it."""

    def __init__(self, rule: RuleInfo, message: str):
        super().__init__(f"{rule.loc}: rule {rule.ruleset}/{rule.name}: {message}")
        self.rule = rule

    def __str__(self) -> str:  # not the str() of the other base (KeyError would quote the message)
        return str(self.args[0])


_RULE_ERROR_TYPES: dict[type, type] = {}


def rule_error(rule: RuleInfo, exc: Exception) -> Exception:
    """`exc`, raised inside `rule`, as a RuleError that is also an instance of `exc`'s type.

    An error that already names its rule (it has a `rule`: raised by a nested rewrite, or located by the
    generated code) is returned unchanged.
    """
    if isinstance(getattr(exc, "rule", None), RuleInfo):
        return exc
    cls = _RULE_ERROR_TYPES.get(type(exc))
    if cls is None:
        try:
            cls = type("RuleError", (RuleError, type(exc)), {"__module__": __name__})
        except TypeError:  # a built-in with its own instance layout (OSError, ...): the plain RuleError
            cls = RuleError
        _RULE_ERROR_TYPES[type(exc)] = cls
    try:
        return cls(rule, f"{type(exc).__name__}: {exc}")
    except Exception:  # an exception type whose constructor wants other arguments
        return RuleError(rule, f"{type(exc).__name__}: {exc}")


class RuleFailed(Exception):
    """Raised by a generated op function when rule `rid` (its module's index) raised `error`; the engine
    unwraps it, so the rule is named (RuleError, RewriteNotReady attribution) as on the per-rule path."""

    def __init__(self, rid: int, error: BaseException):
        super().__init__(rid, error)
        self.rid = rid
        self.error = error


OpFn = Callable[[Any, Any], "tuple[Any, int] | None"]  # (node, ctx) -> (result, rule index) or None


def chain_function(chain: tuple[tuple[int, RuleFn], ...]) -> OpFn:
    """An op function over per-rule functions: for a matcher built from entries alone (no OPS table)."""
    def run(n: Any, ctx: Any) -> tuple[Any, int] | None:
        rid = -1
        try:
            for rid, fn in chain:
                r = fn(n, ctx)
                if r is not None and r is not n:
                    return r, rid
        except Exception as e:
            raise RuleFailed(rid, e) from None
        return None
    return run


class Entries(list):
    """A matcher's entries, remembering the parts they were composed from (each part's rule-index shift and
    op functions), so that `Matcher(name, m.rules, m.entries)` keeps the parts' op functions."""

    parts: list[tuple[int, dict | None, list]]


class Matcher:
    """Rules grouped by root op, each group in rule-file order.

    `entries` are (root ops or None for any op, rule index, function). A rule whose
    pattern has commutative variants contributes one entry per variant. `ops` (generated modules) maps a
    root op, or None for any other op, to one function trying all that op's rules in rule order.

    Two dispatch tables: `dispatch` (per op, the per-rule functions: the traced path times each rule) and
    `fast` (per op, (rule-index shift, op function) for each composed part, in composition order).
    """

    def __init__(self, name: str, rules: list[RuleInfo], entries: Iterable[tuple[frozenset | None, int, RuleFn]],
                 ops: dict | None = None):
        self.name = name
        self.rules = list(rules)
        parts = getattr(entries, "parts", None) if ops is None else None
        self.entries = Entries(entries)
        self.entries.parts = parts if parts is not None else [(0, ops, list(self.entries))]
        self.dispatch: dict[Ops, tuple[tuple[int, RuleFn], ...]] = {}
        # entries are kept in rule order; a wildcard root joins every op's list at its place
        for op in Ops:
            chain = tuple((rid, fn) for ops_, rid, fn in self.entries if ops_ is None or op in ops_)
            if chain:
                self.dispatch[op] = chain
        self.fast: dict[Ops, tuple[tuple[int, OpFn], ...]] = {}
        for op in self.dispatch:
            fns = []
            for shift, opfns, part in self.entries.parts:
                if opfns is None:
                    chain = tuple((rid, fn) for ops_, rid, fn in part if ops_ is None or op in ops_)
                    fn = chain_function(chain) if chain else None
                else:
                    fn = opfns.get(op, opfns.get(None))
                if fn is not None:
                    fns.append((shift, fn))
            self.fast[op] = tuple(fns)

    def __add__(self, other: Matcher) -> Matcher:
        shift = len(self.rules)
        entries = Entries(self.entries + [(ops, rid + shift, fn) for ops, rid, fn in other.entries])
        entries.parts = self.entries.parts + [(s + shift, o, p) for s, o, p in other.entries.parts]
        return Matcher(f"{self.name}+{other.name}", self.rules + other.rules, entries)

    def named(self, name: str) -> Matcher:
        """This matcher under another name (a composed rule set is named after the set, not its parts); the
        tables are shared, not rebuilt."""
        out = copy.copy(self)
        out.name = name
        return out

    def __repr__(self) -> str:
        return f"<Matcher {self.name}: {len(self.rules)} rules>"
