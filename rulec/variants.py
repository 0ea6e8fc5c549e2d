"""Commutative variants of a pattern: the two sources of a commutative op, in both orders."""
from __future__ import annotations

import itertools
from dataclasses import replace

from rulec.runtime.ir.ops import GROUPS

from .model import Pat, Rule

MAX_VARIANTS = 16


def _swappable(p: Pat, can_refuse: bool) -> bool:
    # an op set of which only some ops are commutative swaps for those ops (see _swapped)
    if not (p.ops is not None and p.src is not None and len(p.src) == 2 and p.rest is None
            and p.ops & GROUPS["Commutative"]):
        return False
    a, b = p.src
    if a.key() == b.key():
        return False
    # children of the same shape match the same nodes either way round; the swapped order
    # only matters when a guard (or callback) can refuse the first binding
    return can_refuse or a.shape_key() != b.shape_key()


def rule_can_refuse(rule: Rule) -> bool:
    """Whether a rule may decline after its pattern matched: it has a guard, a callback, a fact (which always
    declines), or a name captured twice (an equality test, which one order of the sources may pass and the
    other fail)."""
    names = [q.name for q in rule.match.walk() if q.name]
    return rule.when is not None or rule.call is not None or rule.fact is not None or len(names) != len(set(names))


def pattern_variants(p: Pat, can_refuse: bool = True, limit: int = MAX_VARIANTS) -> list[Pat]:
    """Every distinct pattern obtained by swapping sources of commutative ops, original first, at most `limit`.

    `can_refuse` says whether the rule may decline after a structural match: see rule_can_refuse.
    """
    if p.src is None:
        return [p]
    child_variants = [pattern_variants(c, can_refuse, limit) for c in p.src]
    if all(len(vs) == 1 for vs in child_variants) and not _swappable(p, can_refuse):
        return [p]  # the common case: nothing to swap here or below
    out: list[Pat] = []
    seen: set = set()
    for combo in itertools.product(*child_variants):
        orders = [(combo, p.ops), (combo[::-1], p.ops & GROUPS["Commutative"])] if _swappable(p, can_refuse) \
            else [(combo, p.ops)]
        for srcs, ops in orders:
            v = replace(p, src=tuple(srcs), ops=ops)
            if v.key() not in seen:
                seen.add(v.key())
                out.append(v)
            if len(out) >= limit:
                return out
    return out
