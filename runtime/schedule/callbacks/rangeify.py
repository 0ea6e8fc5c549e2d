"""Stage `rangeify`: the stateful parts of turning movement ops and ops into indexed loops.

State lives in RangeifyContext: the counter that allocates RANGEs, and the
children gate that holds a shared node until all of its consumers have shown
their ranges. The index arithmetic of movement ops is pure: it is in
runtime/schedule/helpers.py, called from rules/schedule/rangeify_mops.yaml.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any

from rulec.runtime.ir.dtype import AddrSpace, dtypes
from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.engine.rewrite import RewriteNotReady
from rulec.runtime.device import Device
from rulec.runtime.ir.shape import device_of, is_unit_loop
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.helpers import INVALID, simplify_index


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


def _index(src: UOp, idxs, dtype=None, arg: Any = None) -> UOp:
    return UOp(Ops.INDEX, dtype or src.dtype, (src, *idxs), arg)


# ------------------------------------------------------------------ ops


def map_realize(ctx: RangeifyContext, x: UOp) -> UOp | None:
    """A REALIZE becomes a BUFFERIZE over fresh loop ranges."""
    if x.arg is not None:
        return None
    if (done := ctx.made.get(x)) is not None:
        return done
    ranges = [ctx.new_range(s) for s in x.shape]
    body = _index(x.src[0], ranges)
    opts = BufferizeOpts(device_of(x.src[0], Device.DEFAULT))  # a graph of constants alone: the default
    out = ctx.made[x] = UOp(Ops.BUFFERIZE, x.dtype, (body, *x.src[1:], *ranges), opts, x.src[0].tag)
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
        per_axis = [tuple(_unit_loop_as_zero(i) for i in axis) for axis in zip(*[ch.src[1:] for ch in seen.values()])]
        all_same = all(_all_same(axis) for axis in per_axis)
        out: list[UOp] = []
        ended_axes: list[int] = []
        ended: list[UOp] = []
        for axis, choices in enumerate(per_axis):
            idxs, valids = zip(*[_split_valid(i) for i in choices])
            if _all_same(idxs) and all_same:
                # every consumer reads the same index: compute once, valid where any consumer is
                valid = _any_valid(valids)
                out.append(simplify_index(valid.where(idxs[0], INVALID)))
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
        ret = UOp(Ops.BUFFERIZE, c.dtype, (ret, *ended), BufferizeOpts(device_of(c, Device.DEFAULT)))
        ret = _index(ret, [idx.src[1 + a] for a in ended_axes])
    return ret


def _any_valid(valids: tuple[UOp, ...]) -> UOp:
    """Where any consumer reads: the OR of their gates. With no gate anywhere (all True, the usual case)
    that is True itself, handed to index_symbolic without an OR chain for it to fold (3x faster)."""
    if all(v.op is Ops.CONST and v.arg is True for v in valids):
        return valids[0]
    return functools.reduce(operator.or_, valids, UOp.const(dtypes.bool, False))


def _unit_loop_as_zero(i: UOp) -> UOp:
    """A loop of one iteration reads index 0: consumers that each run their own such loop over an axis
    read the same element of it, so they share the node instead of buffering it."""
    return ZERO if is_unit_loop(i) else i


ZERO = UOp.const(dtypes.index, 0)


def _all_same(xs) -> bool:
    return all(x is xs[0] for x in xs)
