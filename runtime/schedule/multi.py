"""Helpers of rules/schedule/multi.yaml: one op on multi-device values as one op per device.

Pure functions over UOps. Sources are lowered first, so every multi-device operand of the node they are
given is already `MULTI(MSTACK(parts), (axis, devices))`; the layout of the node itself (runtime/ir/placement.py)
was checked when it was built. Each returns the node's replacement, with the node's tag (the scheduler's
number of the tensor it computes: runtime/schedule/callbacks/tags.py).
"""
from __future__ import annotations

import functools

from rulec.runtime.ir.multi import Layout, device_slice, layout, multi, part_arg, parts
from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.helpers import buffer_under, merge_tags


def _carry(new: UOp, old: UOp) -> UOp:
    """`new` standing for `old`: it gets old's tag too. A view of a computed value is stored first: a tagged
    view keeps no tag (rangeify's untag-movement: the tensor is the view of its realized base), and here the
    base is a device's part, which no tensor is, so `old`'s tensor would be left unrealized."""
    if old.tag is None:
        return new
    if new.op in GroupOp.Movement and buffer_under(new) is None:
        new = UOp(Ops.CONTIGUOUS, new.dtype, (new,))
    return new.replace(tag=merge_tags(new.tag, old.tag))


def select_part(m: UOp) -> UOp:
    """MSELECT(MULTI(MSTACK(parts)), i): part i."""
    return _carry(parts(m.src[0])[m.arg], m)


def _operand(s: UOp, d: int, lay: Layout, elementwise: bool) -> UOp:
    """Operand `s` on device `d` of a result laid out as `lay`: its part, or device d's slice of the shard
    axis of a replicated operand or of one with no device. An elementwise operand sharded on another axis
    than the result is gathered to device d, then sliced (placement: resharding)."""
    got = layout(s)
    if got is not None:
        if s.op is not Ops.MULTI:
            raise RuntimeError(f"multi-device lowering: a {s.op.name} source was not lowered before its user")
        if elementwise and got.axis is not None and got.axis != lay.axis:
            s = gather(_copy(s, lay.devices[d]))
        else:
            s = parts(s)[d]
            if got.axis is not None:
                return s
    return device_slice(s, d, len(lay.devices), lay.axis)


def per_device(x: UOp) -> UOp:
    """`x` (elementwise, movement, a reduction off the shard axis, contiguous, assign) on each device's part."""
    lay = layout(x)
    src_lay = layout(x.src[0]) if x.op in GroupOp.Movement else None
    arg = part_arg(x, src_lay) if src_lay is not None else x.arg
    if x.op is Ops.ASSIGN:
        lay = layout(x.src[0])  # the value is laid out as the target
    ew = x.op in GroupOp.Elementwise
    new = [x.replace(src=tuple(_operand(s, d, lay, ew) for s in x.src), arg=arg, tag=None)
           for d in range(len(lay.devices))]
    return multi(new, lay, x.tag)


def all_reduce(r: UOp) -> UOp:
    """A reduction over the shard axis: each device reduces its part; then every device combines all the
    partial results, copied to it, in device order (so the replicas are equal to the bit)."""
    src = layout(r.src[0])
    partial = [r.replace(src=(p,), tag=None) for p in parts(r.src[0])]
    op = r.arg[0]  # ADD, MUL or MAX: the partial results combine with the reduction's own op
    totals = [functools.reduce(lambda a, b: UOp(op, r.dtype, (a, b)),
                               [p if src.devices[j] == dev else _copy(p, dev) for j, p in enumerate(partial)])
              for dev in src.devices]
    return multi(totals, Layout(src.devices, None), r.tag)


def gather(c: UOp) -> UOp:
    """A COPY of a multi-device value to one device: the part already there, or the parts copied and put
    side by side along the shard axis."""
    x, dev = c.src[0], c.src[1].arg
    lay, ps = layout(x), parts(x)
    if lay.axis is None:
        return _carry(ps[lay.devices.index(dev)] if dev in lay.devices else _copy(ps[0], dev), c)
    moved = [p if d == dev else _copy(p, dev) for p, d in zip(ps, lay.devices)]
    a, step, n = lay.axis, ps[0].shape[lay.axis], len(ps)
    placed = [UOp(Ops.PAD, p.dtype, (p,), tuple((j * step, (n - 1 - j) * step) if i == a else (0, 0)
                                                 for i in range(len(p.shape)))) for j, p in enumerate(moved)]
    join = Ops.OR if c.dtype.kind == "bool" else Ops.ADD  # padding is 0 (False): the sum is the concatenation
    return _carry(functools.reduce(lambda u, v: UOp(join, c.dtype, (u, v)), placed), c)


def shrink_shard_axis(s: UOp) -> UOp:
    """A shrink across the shard axis: the result is replicated; each device takes the overlapping piece of
    every part the range touches (copied to it from another device) and puts the pieces side by side."""
    m = s.src[0]
    lay, ps = layout(m), parts(m)
    a, step = lay.axis, ps[0].shape[lay.axis]
    begin, end = s.arg[a]
    pieces = []  # (device index of the part, the part shrunk to its overlap, where the overlap starts)
    for j, p in enumerate(ps):
        lo, hi = max(begin, j * step), min(end, (j + 1) * step)
        if lo < hi:
            arg = tuple((lo - j * step, hi - j * step) if i == a else b for i, b in enumerate(s.arg))
            pieces.append((j, UOp(Ops.SHRINK, p.dtype, (p,), arg), lo - begin))
    if not pieces:  # an empty range: each device's own part, shrunk to nothing
        empty = tuple((0, 0) if i == a else b for i, b in enumerate(s.arg))
        return multi([UOp(Ops.SHRINK, p.dtype, (p,), empty) for p in ps], Layout(lay.devices, None), s.tag)
    join = Ops.OR if s.dtype.kind == "bool" else Ops.ADD  # padding is 0 (False): the sum is the concatenation
    totals = []
    for d, dev in enumerate(lay.devices):
        placed = []
        for j, piece, at in pieces:
            moved = piece if j == d else _copy(piece, dev)
            size = piece.shape[a]
            pad = tuple((at, end - begin - at - size) if i == a else (0, 0) for i in range(len(piece.shape)))
            placed.append(moved if all(pd == (0, 0) for pd in pad) else UOp(Ops.PAD, piece.dtype, (moved,), pad))
        totals.append(functools.reduce(lambda u, v: UOp(join, s.dtype, (u, v)), placed))
    return multi(totals, Layout(lay.devices, None), s.tag)


def _copy(p: UOp, dev: str) -> UOp:
    return UOp(Ops.COPY, p.dtype, (p, UOp(Ops.DEVICE, arg=dev)))


MULTI_HELPERS = {"per_device": per_device, "all_reduce": all_reduce, "gather": gather, "select_part": select_part,
                 "shrink_shard_axis": shrink_shard_axis}
