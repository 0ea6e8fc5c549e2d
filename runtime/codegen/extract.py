"""Egglog extraction of each kernel's index arithmetic (a pipeline step of rules/codegen/*.pipeline.yaml).

The greedy Python engine applies the `index_symbolic` rules in order and keeps the first form it reaches.
Equality saturation keeps every form the rules prove equal and extracts the cheapest one. This step runs
the same rules on the egglog engine over the index operands of the kernel's loads and stores, within a
time budget, and keeps egglog's forms when they need fewer ALU ops in all (shared subexpressions counted
once); otherwise the greedy forms stay. The rule set is `index_saturation` (rules/codegen/
index_saturation.yaml): the symbolic rules plus associativity and factoring, which only saturation can
use (greedily they would rewrite forever). Kernels with fewer than MIN_ALU_OPS index ops are skipped. `$RULEC_EGGLOG_BUDGET` (seconds per kernel, default 0.2; 0 turns
the step off).
"""
from __future__ import annotations

import os

from rulec.runtime.engine.egraph import EngineError
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp, substitute

RULE_SET = "index_saturation"
DEFAULT_BUDGET = 0.2
# below this many ALU ops in a kernel's index arithmetic, there is too little to regroup to pay for a
# saturation run (about 0.1 s per kernel)
MIN_ALU_OPS = 4


def alu_count(roots: list[UOp]) -> int:
    """Distinct ALU nodes under `roots` (a node shared by several roots counts once)."""
    return sum(1 for u in UOp.sink(*roots).toposort() if u.op in GroupOp.ALU)


def index_operands(sink: UOp) -> list[UOp]:
    """The index operands of every INDEX into a buffer, with some arithmetic in them, in order."""
    found = dict.fromkeys(u.src[1] for u in sink.toposort() if u.op is Ops.INDEX and len(u.src) > 1
                          and u.src[0].op is Ops.DEFINE_GLOBAL and u.src[1].op in GroupOp.ALU)
    return list(found)


def _terms(u: UOp) -> list[UOp]:
    """The terms of a sum (`u` itself when it is no ADD)."""
    out, stack = [], [u]
    while stack:
        x = stack.pop()
        if x.op is Ops.ADD:
            stack.extend(x.src)
        else:
            out.append(x)
    return out


def _factor(t: UOp) -> int | None:
    return t.src[1].arg if t.op is Ops.MUL and t.src[1].op is Ops.CONST else None


def may_improve(exprs: list[UOp]) -> bool:
    """Whether saturation has something to work with that the greedy rules leave: two terms of one sum
    with the same constant factor, a nested sum under a division or modulo holding a term whose factor is
    a multiple of the divisor, or a constant offset scaled and then taken away. A cheap test, so that most
    kernels (whose index arithmetic the greedy rules already leave minimal) skip the e-graph."""
    for u in UOp.sink(*exprs).toposort():
        if u.op is Ops.ADD:
            factors = [f for f in map(_factor, _terms(u)) if f is not None]
            if len(factors) != len(set(factors)):
                return True
        elif u.op in (Ops.MOD, Ops.IDIV) and u.src[1].op is Ops.CONST and u.src[0].op is Ops.ADD:
            c = u.src[1].arg
            nested = any(s.op is Ops.ADD for s in u.src[0].src)
            if nested and c and any((f := _factor(t)) is not None and f % c == 0 for t in _terms(u.src[0])):
                return True
        elif u.op in (Ops.ADD, Ops.SUB) and u.src[0].op is Ops.MUL and u.src[0].src[0].op is Ops.ADD \
                and u.src[1].op is Ops.CONST:
            return True
    return False


def extract_indices(sink: UOp) -> UOp:
    budget = float(os.environ.get("RULEC_EGGLOG_BUDGET", DEFAULT_BUDGET))
    exprs = index_operands(sink)
    if budget <= 0 or alu_count(exprs) < MIN_ALU_OPS or not may_improve(exprs):
        return sink
    from rulec.runtime.engine import artifacts

    try:
        out = artifacts.shipped_ruleset(RULE_SET).rewrite(UOp.sink(*exprs), engine="egglog", time_limit=budget,
                                                          allow_partial=True)
    except EngineError:
        return sink  # egglog could not run these rules here: the greedy forms are correct already
    new = list(out.src)
    if len(new) != len(exprs) or alu_count(new) >= alu_count(exprs) or any(
            n.dtype != e.dtype for n, e in zip(new, exprs)):
        return sink
    return substitute(sink, dict(zip(exprs, new)))
