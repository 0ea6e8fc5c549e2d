"""Stage `rangeify`: the stateful parts of turning movement ops and ops into indexed loops.

State lives in RangeifyContext: the counter that allocates RANGEs, and the
children gate that holds a shared node until all of its consumers have shown
their ranges. The index arithmetic of reshape, pad and expand is here too,
because it folds through the `symbolic` rule set as it goes.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any

from ..dtype import AddrSpace, dtypes
from ..ops import Ops
from ..rewrite import RewriteNotReady, graph_rewrite
from ..uop import UOp


@dataclass(frozen=True)
class BufferizeOpts:
    """The arg of a BUFFERIZE: where the buffer lives."""

    device: Any = "CPU"
    addrspace: AddrSpace = AddrSpace.GLOBAL


@dataclass
class RangeifyContext:
    # children gating: per CHILDREN node, the INDEX each consumer asked with
    seen_children: dict[UOp, dict[int, UOp]] = field(default_factory=dict)
    seen_child: dict[UOp, tuple] = field(default_factory=dict)
    range_idx: int = 0
    # what each REALIZE and reduce INDEX became: the engine reruns a rewrite chain when two chains
    # meet at one node (or a chain is retried after RewriteNotReady), and fresh ranges must not differ
    made: dict[UOp, UOp] = field(default_factory=dict)

    def new_range(self, size: Any, kind: str = "loop") -> UOp:
        r = UOp.range(size, self.range_idx, kind)
        self.range_idx += 1
        return r


@functools.cache
def _symbolic():
    from ..artifacts import shipped_matcher

    return shipped_matcher("index_symbolic")


def simplify(u: UOp) -> UOp:
    return graph_rewrite(u, _symbolic(), name="symbolic (index)")


def _index(src: UOp, idxs, dtype=None, arg: Any = None) -> UOp:
    return UOp(Ops.INDEX, dtype or src.dtype, (src, *idxs), arg)


def _const(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


INVALID = UOp(Ops.INVALID, dtypes.index)


# ------------------------------------------------------------------ movement ops


def map_reshape(idx: UOp, r: UOp) -> UOp:
    """Linearize the index over the reshaped shape, then split it over the source shape."""
    flat, stride = _const(0), 1
    for size, i in reversed(list(zip(r.shape, idx.src[1:]))):
        flat = flat + i * stride
        stride *= size
    parts: list[UOp] = []
    for size in reversed(r.src[0].shape):
        parts.append(flat % size)
        flat = flat // size
    new = simplify(UOp.sink(*parts)).src[::-1] if parts else ()
    return _index(r.src[0], new, idx.dtype, idx.arg)


def map_pad(idx: UOp, r: UOp) -> UOp:
    """Shift indices into the source; lanes in the padding read 0 through a validity mask."""
    idxs = list(idx.src[1:])
    valid_all = UOp.const(dtypes.bool, True)
    for i, (size, (before, after)) in enumerate(zip(r.shape, r.arg)):
        if before == 0 and after == 0:
            continue
        valid = UOp.const(dtypes.bool, True)
        if after > 0:
            valid = valid & (idxs[i] < size - after)
        if before > 0:
            valid = valid & (idxs[i] > before - 1)  # i >= before, as one CMPLT
        valid_all = valid_all & valid
        idxs[i] = simplify(valid.where(idxs[i] - before, INVALID))
    loaded = _index(r.src[0], idxs, idx.dtype, idx.arg)
    return simplify(valid_all).where(loaded, UOp.const(r.dtype, 0))


def map_expand(r: UOp, idx: UOp) -> UOp:
    """Broadcast axes read index 0; their ranges end here unless another axis still uses them."""
    new_idxs: list[UOp] = []
    ending: list[UOp] = []
    kept: list[UOp] = []
    for i, before, after in zip(idx.src[1:], r.src[0].shape, r.shape):
        rngs = [u for u in i.toposort() if u.op is Ops.RANGE]
        if before == after:
            kept.extend(rngs)
            new_idxs.append(i)
        else:
            ending.extend(rngs)
            new_idxs.append(_const(0))
    ends = [u.arg for u in ending if u not in kept]
    if idx.arg is not None:
        ends.append(idx.arg)
    return _index(r.src[0], new_idxs, arg=min(ends) if ends else None)


# ------------------------------------------------------------------ ops


def map_realize(ctx: RangeifyContext, x: UOp) -> UOp | None:
    """A REALIZE becomes a BUFFERIZE over fresh loop ranges."""
    if x.arg is not None:
        return None
    if (done := ctx.made.get(x)) is not None:
        return done
    ranges = [ctx.new_range(s) for s in x.shape]
    body = _index(x.src[0], ranges)
    out = ctx.made[x] = UOp(Ops.BUFFERIZE, x.dtype, (body, *x.src[1:], *ranges), BufferizeOpts(), x.src[0].tag)
    return out


def map_reduce(ctx: RangeifyContext, idx: UOp, red: UOp) -> UOp:
    """Reduced axes get fresh reduce ranges; the others keep the consumer's indices."""
    if (done := ctx.made.get(idx)) is not None:
        return done
    idxs = list(idx.src[1:])
    new: list[UOp] = []
    for axis, size in enumerate(red.src[0].shape):
        if axis in red.arg[1]:
            idxs[axis] = ctx.new_range(size, "reduce")
            new.append(idxs[axis])
    out = ctx.made[idx] = UOp(Ops.REDUCE, red.dtype, (_index(red.src[0], idxs), *new), red.arg[0], red.tag)
    return out


def _split_valid(i: UOp) -> tuple[UOp, UOp]:
    if i.op is Ops.WHERE and i.src[2].op is Ops.INVALID:
        return i.src[1], i.src[0]
    return i, UOp.const(dtypes.bool, True)


def index_child(ctx: RangeifyContext, c: UOp, x: UOp, idx: UOp) -> UOp:
    """Hold a shared node until every consumer has indexed it, then share or buffer."""
    seen = ctx.seen_children.setdefault(c, {})
    if len(seen) != x.arg[1]:
        seen[x.arg[0]] = idx
        raise RewriteNotReady
    if c not in ctx.seen_child:
        per_axis = list(zip(*[ch.src[1:] for ch in seen.values()]))
        all_same = all(_all_same(axis) for axis in per_axis)
        out: list[UOp] = []
        ended_axes: list[int] = []
        ended: list[UOp] = []
        for axis, choices in enumerate(per_axis):
            idxs, valids = zip(*[_split_valid(i) for i in choices])
            if _all_same(idxs) and all_same:
                # every consumer reads the same index: compute once, valid where any consumer is
                valid = functools.reduce(operator.or_, valids, UOp.const(dtypes.bool, False))
                out.append(simplify(valid.where(idxs[0], INVALID)))
            else:
                out.append(ctx.new_range(c.shape[axis]))
                ended.append(out[-1])
                ended_axes.append(axis)
        ctx.seen_child[c] = (out, ended_axes, ended)
    out, ended_axes, ended = ctx.seen_child[c]
    ret = _index(c, out)
    if ended_axes:
        # consumers disagree: materialize a buffer over the new ranges and read it back
        assert len(ended_axes) == len(out), "partial buffers of shared nodes need local memory"
        ret = UOp(Ops.BUFFERIZE, c.dtype, (ret, *ended), BufferizeOpts())
        ret = _index(ret, [idx.src[1 + a] for a in ended_axes])
    return ret


def _all_same(xs) -> bool:
    return all(x is xs[0] for x in xs)


def unprocessed_index(x: UOp) -> UOp:
    raise RuntimeError(f"rangeify: INDEX of {x.src[0].op.name} was not rewritten by any rule")
