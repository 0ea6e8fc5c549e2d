"""The shadowing warning: a rule that can never fire because an earlier unguarded rule matches all it matches.

Comparing every pair of rules is quadratic, so the earlier rules' patterns (each commutative variant) are
indexed by one necessary condition each: the most selective constraint they put on one position of the
matched tree (a literal arg there, else the op set there). A later rule looks up only the keys its own
pattern satisfies, which leaves a handful of candidates for the exact `subsumes` test.
"""
from __future__ import annotations

from typing import Any, Iterator

from .diagnostics import Reporter
from .model import NOARG, Pat, Rule, RuleSetDef
from .variants import pattern_variants

Path = tuple[int, ...]


def subsumes(a: Pat, b: Pat) -> bool:
    """True when `a` matches every node that `b` matches (ignoring guards)."""
    if a.ops is not None and (b.ops is None or not b.ops <= a.ops):
        return False
    if a.dtypes is not None and (b.dtypes is None or not b.dtypes <= a.dtypes):
        return False
    if a.arg is not NOARG and (b.arg is NOARG or a.arg != b.arg):
        return False
    if a.src is None:
        return True
    if b.src is None:
        return False
    if a.rest is None and (b.rest is not None or len(b.src) != len(a.src)):
        return False
    if len(b.src) < len(a.src):
        return False
    return all(subsumes(x, y) for x, y in zip(a.src, b.src))


def _positions(p: Pat) -> Iterator[tuple[Path, Pat]]:
    """Every sub-pattern with its path of source indices from the root."""
    stack: list[tuple[Path, Pat]] = [((), p)]
    while stack:
        path, q = stack.pop()
        yield path, q
        for i, s in enumerate(q.src or ()):
            stack.append((path + (i,), s))


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _index_keys(a: Pat) -> list[tuple]:
    """Keys under which `a` is filed: every pattern `a` subsumes has at least one of them (see _lookup_keys)."""
    best: list[tuple] = [("any",)]
    best_size = float("inf")
    for path, q in _positions(a):
        if q.arg is not NOARG and _hashable(q.arg):
            return [("arg", path, q.arg)]  # a literal is as selective as a constraint gets
        if q.ops is not None and len(q.ops) < best_size:
            best, best_size = [("op", path, op) for op in q.ops], len(q.ops)
    return best


def _lookup_keys(b: Pat) -> list[tuple]:
    """Every key a pattern that subsumes `b` may be filed under."""
    keys: list[tuple] = [("any",)]
    for path, q in _positions(b):
        if q.arg is not NOARG and _hashable(q.arg):
            keys.append(("arg", path, q.arg))
        if q.ops:
            # a subsuming pattern's op set holds all of b's: filed under each, so one is enough to look up
            keys.append(("op", path, min(q.ops, key=lambda op: op.name)))
    return keys


def _can_shadow(rule: Rule) -> bool:
    names = [q.name for q in rule.match.walk() if q.name]
    return rule.when is None and rule.call is None and rule.fact is None and len(names) == len(set(names))


Filed = list[tuple[Pat, list[tuple]]]  # a rule's variants with their index keys; empty if it cannot shadow


class ShadowIndex:
    """The patterns of earlier unguarded rules, filed by _index_keys, in rule order."""

    def __init__(self, filed: dict[int, Filed]):
        self.filed = filed  # shared by the rule sets of one check: each rule's variants are filed once
        self.buckets: dict[tuple, list[tuple[int, Pat, Rule]]] = {}

    def add(self, order: int, rule: Rule) -> None:
        filed = self.filed.get(id(rule))
        if filed is None:
            variants = pattern_variants(rule.match) if _can_shadow(rule) else []
            filed = self.filed[id(rule)] = [(v, _index_keys(v)) for v in variants]
        for v, keys in filed:
            for key in keys:
                self.buckets.setdefault(key, []).append((order, v, rule))

    def first_shadower(self, rule: Rule) -> Rule | None:
        """The earliest indexed rule that matches everything `rule` matches."""
        found: tuple[int, Rule] | None = None
        for key in _lookup_keys(rule.match):
            for order, v, earlier in self.buckets.get(key, ()):
                if (found is None or order < found[0]) and subsumes(v, rule.match):
                    found = (order, earlier)
        return None if found is None else found[1]


def check_shadowing(rs: RuleSetDef, table: dict[str, RuleSetDef], rep: Reporter,
                    filed: dict[int, Filed] | None = None) -> None:
    """Warn about each rule of `rs` that an earlier rule (its own or included) always pre-empts.

    Pass one `filed` dict to every call of a check, so that an included rule's variants are filed once."""
    rules = rs.all_rules(table)
    own = set(map(id, rs.rules))
    index = ShadowIndex({} if filed is None else filed)
    for order, later in enumerate(rules):
        if id(later) in own:  # an included rule is reported where it is defined
            earlier = index.first_shadower(later)
            if earlier is not None:
                where = "" if id(earlier) in own else f" (included from rule set '{earlier.ruleset}')"
                rep.warning(later.loc, f"rule '{later.name}' can never fire: rule '{earlier.name}' at "
                                       f"{earlier.loc}{where} matches everything it matches and has no guard",
                            len(later.name))
        index.add(order, later)
