"""Stage `add realize`: every marked node is read through a REALIZE.

The realize map (a dict used as an ordered set) is the state: the `fact:` rules of
rules/schedule/realize.yaml add to it, and `add_realize` wraps every marked node
in a REALIZE exactly once.
"""
from __future__ import annotations

from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp


def realize_marked_sources(ctx: dict[UOp, None], x: UOp) -> UOp | None:
    """Read every marked source through a REALIZE.

    The wrap is made on the consumer's edge, not by rewriting the marked node to
    REALIZE(itself): a node whose rewrite contains itself has no fixed point in a
    memoized rewrite. Every consumer builds the same (hash-consed) REALIZE.
    """
    if not any(s in ctx for s in x.src):
        return None
    return x.replace(src=tuple(UOp(Ops.REALIZE, s.dtype, (s,)) if s in ctx else s for s in x.src))
