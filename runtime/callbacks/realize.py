"""Stages `realize marking` and `add realize`: which nodes must become buffers.

The realize map (a dict used as an ordered set) is the state: marking rules add
to it, and `add_realize` wraps every marked node in a REALIZE exactly once.
"""
from __future__ import annotations

from ..ops import GroupOp, Ops
from ..uop import UOp


def realize_sink_sources(ctx: dict[UOp, None], s: UOp) -> None:
    for x in s.src:
        if x.base.op not in GroupOp.AlwaysContiguous:
            ctx[x.base] = None
    return None


def realize_node(ctx: dict[UOp, None], x: UOp) -> None:
    ctx[x] = None
    return None


def realize_sources(ctx: dict[UOp, None], x: UOp) -> None:
    for s in x.src:
        if s.op not in GroupOp.AlwaysContiguous:
            ctx[s] = None
    return None


def realize_assign_value(ctx: dict[UOp, None], a: UOp) -> None:
    if a.src[1].op not in GroupOp.AlwaysContiguous:
        ctx[a.src[1]] = None
    return None


def realize_marked_sources(ctx: dict[UOp, None], x: UOp) -> UOp | None:
    """Read every marked source through a REALIZE.

    The wrap is made on the consumer's edge, not by rewriting the marked node to
    REALIZE(itself): a node whose rewrite contains itself has no fixed point in a
    memoized rewrite. Every consumer builds the same (hash-consed) REALIZE.
    """
    if not any(s in ctx for s in x.src):
        return None
    return x.replace(src=tuple(UOp(Ops.REALIZE, s.dtype, (s,)) if s in ctx else s for s in x.src))
