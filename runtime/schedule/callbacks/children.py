"""Stage `children marking`: nodes read by several consumers get CHILD/CHILDREN markers.

Rangeify later waits at a CHILDREN node until every consumer has asked for it
with its own ranges, and only then decides whether the ranges agree or a buffer
is needed.
"""
from __future__ import annotations

from dataclasses import dataclass

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp, op_mask

_REDUCE, _STORAGE = op_mask(Ops.REDUCE_AXIS), op_mask(Ops.BUFFER, Ops.CONTIGUOUS)


@dataclass
class ChildrenContext:
    children: dict[UOp, list[UOp]] | None = None


def find_children(sink: UOp, ctx: ChildrenContext) -> UOp:
    """A pipeline step (a whole-graph pass): record the nodes several consumers read, where gating pays."""
    ctx.children = {}
    for node, users in sink.get_children_map().items():
        # a REALIZE, or a view of one, is a buffer already: readers share it without a gate (and a
        # view of it that is an output is never indexed, so a gate would wait forever)
        if node.base.op is Ops.REALIZE:
            continue
        consumers = [u for u in users if u.op is not Ops.SINK]
        if len(consumers) <= 1:
            continue
        # only worth gating where a reduce meets a buffer: elsewhere recomputing is cheap (the op masks are
        # cached per node: a walk below every shared node would be quadratic on a long chain)
        if node.has_op(_REDUCE) and node.has_op(_STORAGE):
            ctx.children[node] = consumers
    return sink


def mark_children(ctx: ChildrenContext, x: UOp) -> UOp | None:
    assert ctx.children is not None, "children marking needs the pipeline's `find children` step first"
    # the SINK is not a consumer that takes ranges: its sources stay unmarked
    if x.op is Ops.SINK or not any(s in ctx.children for s in x.src):
        return None
    new_src = []
    for s in x.src:
        users = ctx.children.get(s)
        if users is None:
            new_src.append(s)
            continue
        gate = UOp(Ops.CHILDREN, s.dtype, (s,), len(users))
        new_src.append(UOp(Ops.CHILD, s.dtype, (gate,), (users.index(x), len(users))))
    return x.replace(src=tuple(new_src))
