"""The runtime form of a compiled rule set: rule metadata plus a dispatch table by root op."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .ops import Ops

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


class Matcher:
    """Rules grouped by root op, each group in rule-file order.

    `entries` are (root ops or None for any op, rule index, function). A rule whose
    pattern has commutative variants contributes one entry per variant.
    """

    def __init__(self, name: str, rules: list[RuleInfo], entries: Iterable[tuple[frozenset | None, int, RuleFn]]):
        self.name = name
        self.rules = list(rules)
        self.entries = list(entries)
        self.dispatch: dict[Ops, tuple[tuple[int, RuleFn], ...]] = {}
        # entries are kept in rule order; a wildcard root joins every op's list at its place
        for op in Ops:
            chain = tuple((rid, fn) for ops, rid, fn in self.entries if ops is None or op in ops)
            if chain:
                self.dispatch[op] = chain

    def __add__(self, other: Matcher) -> Matcher:
        shift = len(self.rules)
        return Matcher(f"{self.name}+{other.name}", self.rules + other.rules,
                       self.entries + [(ops, rid + shift, fn) for ops, rid, fn in other.entries])

    def __repr__(self) -> str:
        return f"<Matcher {self.name}: {len(self.rules)} rules>"
