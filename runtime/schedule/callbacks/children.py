"""Stage `children marking`: nodes read by several consumers get CHILD/CHILDREN markers.

Rangeify later waits at a CHILDREN node until every consumer has asked for it
with its own ranges, and only then decides whether the ranges agree or a buffer
is needed.
"""
from __future__ import annotations

from dataclasses import dataclass

from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp, op_mask

_REDUCE, _STORAGE = op_mask(Ops.REDUCE_AXIS), op_mask(Ops.BUFFER, Ops.CONTIGUOUS)


@dataclass
class ChildrenContext:
    children: dict[UOp, list[UOp]] | None = None


def find_children(sink: UOp, ctx: ChildrenContext) -> UOp:
    """A pipeline step (a whole-graph pass): record the nodes several consumers read, where gating pays."""
    ctx.children = {}
    children = sink.get_children_map()
    ends: dict[UOp, UOp | None] = {}
    for node, users in children.items():
        # a REALIZE, or a view of one, is a buffer already: readers share it without a gate (and a
        # view of it that is an output is never indexed, so a gate would wait forever)
        if node.base.op is Ops.REALIZE:
            continue
        consumers = [u for u in users if u.op is not Ops.SINK]
        if len(consumers) <= 1:
            continue
        # only worth gating where a reduce meets a buffer: elsewhere recomputing is cheap (the op masks are
        # cached per node: a walk below every shared node would be quadratic on a long chain)
        if node.has_op(_REDUCE) and node.has_op(_STORAGE) and not _one_index(consumers, children, ends):
            ctx.children[node] = consumers
    return sink


def _one_index(consumers: list[UOp], children: dict[UOp, dict[UOp, None]], ends: dict[UOp, UOp | None]) -> bool:
    """Whether every consumer reads the node at one and the same index, so a gate would always find them
    agree (`relu(x)`: the CMPLT and the WHERE). An elementwise op reads its sources at its own index; each
    consumer is one, and climbs, through elementwise ops that each have one consumer, to the same one."""
    end = _climb(consumers[0], children, ends)
    return end is not None and all(_climb(u, children, ends) is end for u in consumers[1:])


def _climb(u: UOp, children: dict[UOp, dict[UOp, None]], ends: dict[UOp, UOp | None]) -> UOp | None:
    """The elementwise op whose index decides the one `u` (elementwise) is read at; None if `u` is not
    elementwise. Memoized in `ends`, so every node is climbed through once."""
    path = []
    while u not in ends:
        if u.op not in GroupOp.Elementwise:
            ends[u] = None
            break
        path.append(u)
        up = children.get(u, {})
        nxt = next(iter(up)) if len(up) == 1 else None
        if nxt is None or nxt.op not in GroupOp.Elementwise:
            ends[u] = u
            break
        u = nxt
    end = ends[u]
    for p in path:
        ends[p] = end
    return end


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
