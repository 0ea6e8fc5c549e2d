"""Stage `bufferize to store`: every BUFFERIZE gets a fresh buffer and a STORE into it.

Fresh buffers are state (each gets a new UNIQUE id), so this is a callback.
"""
from __future__ import annotations

from rulec.runtime.buffers import new_buffer_uop
from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.shape import prod
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.callbacks.rangeify import BufferizeOpts
from rulec.runtime.schedule.helpers import simplify_index


def _through_movement(u: UOp) -> list[tuple]:
    mops = []
    while u.op in GroupOp.Movement:
        mops.append((u.op, u.arg))
        u = u.src[0]
    return mops[::-1]


def bufferize_to_store(x: UOp) -> UOp:
    ranges = x.src[1:]
    shape = tuple(int(r.vmax) + 1 for r in ranges)
    size = prod(shape)
    if size <= 0:
        raise RuntimeError(f"bufferize to store: zero-sized buffer of shape {shape}")
    opts: BufferizeOpts = x.arg
    ptr = x.dtype.ptr(size, opts.addrspace)
    if x.src[0].op is Ops.ASSIGN:
        # writing into an existing buffer: store through the assign's own target index
        target, value = x.src[0].src[0], x.src[0].src[1]
        assert target.op is Ops.INDEX, "assign target should be indexed by rangeify"
        store = UOp(Ops.STORE, x.dtype, (target.replace(dtype=ptr), value, *ranges))
        out = store
        for op, arg in _through_movement(x.src[0].src[2]) if len(x.src[0].src) > 2 else []:
            out = UOp(op, out.dtype, (out,), arg)
        return UOp(Ops.RESHAPE, x.dtype, (out,), shape, x.tag)
    buf = new_buffer_uop(x.dtype, size, opts.device)
    shaped = UOp(Ops.RESHAPE, buf.dtype, (buf,), shape)
    target = UOp(Ops.INDEX, ptr, (shaped, *ranges))
    store = UOp(Ops.STORE, x.dtype, (target, x.src[0], *ranges))
    out = UOp(Ops.RESHAPE, x.dtype, (store,), shape)
    # a constant extent is final: only a symbolic one needs folding (each fold is a nested rewrite)
    sym_shape = tuple(r.src[0] if r.src[0].op is Ops.CONST else simplify_index(r.src[0]) for r in ranges)
    if any(s.op is not Ops.CONST for s in sym_shape):
        out = UOp(Ops.SHRINK, x.dtype, (out,), tuple((0, s if s.op is not Ops.CONST else s.arg) for s in sym_shape))
    return out.replace(tag=x.tag)
