"""Shape inference for tensor-level ops, and the open ranges of kernel-level ops."""
from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Iterable

from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
# where a value lives (its devices; a multi-device value's layout): shape inference reads it for a part
# of a multi-device value, and callers import device_of/devices_of from here too
from rulec.runtime.ir.placement import device_of, devices_of, part_shape  # noqa: F401

_RANGE_BIT = 1 << Ops.RANGE

if TYPE_CHECKING:
    from rulec.runtime.ir.uop import UOp


def prod(xs: Iterable[Any]) -> Any:
    return functools.reduce(operator.mul, xs, 1)


# ops that have exactly the shape of their first source
_PASSTHROUGH = frozenset({Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.FUSE, Ops.COPY, Ops.ASSIGN,
                          Ops.REALIZE, Ops.CHILD, Ops.CHILDREN, Ops.NOOP, Ops.BIND})
# kernel-level ops: shapes stop here
_SHAPELESS = frozenset({Ops.SINK, Ops.INDEX, Ops.RANGE, Ops.LOAD, Ops.KERNEL, Ops.DEVICE, Ops.UNIQUE,
                        Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.REDUCE, Ops.END, Ops.IF,
                        Ops.ENDIF, Ops.BARRIER, Ops.SPECIAL, Ops.INVALID})


def range_size(r: UOp) -> Any:
    """The extent of a range-like index: the bound of a RANGE, else vmax+1."""
    if r.op is Ops.RANGE:
        end = r.src[0]
        return end.arg if end.op is Ops.CONST else end
    return int(r.vmax) + 1


def is_unit_loop(r: UOp) -> bool:
    """Whether `r` is a RANGE of one iteration: it reads index 0 wherever it is used."""
    return r.op is Ops.RANGE and r.src[0].op is Ops.CONST and r.src[0].arg == 1


def shape_sources(u: UOp) -> tuple[UOp, ...]:
    """The sources whose shape `infer_shape(u)` reads (UOp.shape fills them first, without recursion)."""
    op = u.op
    if op in _PASSTHROUGH or op in (Ops.PERMUTE, Ops.PAD, Ops.FLIP, Ops.REDUCE_AXIS, Ops.MULTI, Ops.MSELECT):
        return u.src[:1]
    if op in GroupOp.Elementwise or op is Ops.MSTACK:
        return u.src
    return ()


def infer_shape(u: UOp) -> tuple | None:
    op = u.op
    if op in _SHAPELESS:
        return None
    if op is Ops.CONST or op is Ops.DEFINE_VAR:
        return ()
    if op is Ops.STORE:
        # a STORE into a buffer reads back as that flat buffer
        size = getattr(u.src[0].dtype, "size", -1)
        return (size,) if size >= 0 else None
    if op is Ops.BUFFER or op is Ops.IOTA:
        return (u.arg,)
    if op is Ops.BUFFER_VIEW:
        return (u.arg[0],)
    if op in _PASSTHROUGH:
        return u.src[0].shape if u.src else None
    if op is Ops.BUFFERIZE:
        return tuple(range_size(r) for r in u.src[1:])
    if op in (Ops.RESHAPE, Ops.EXPAND):
        return tuple(u.arg)
    if op is Ops.PERMUTE:
        inner = u.src[0].shape
        return None if inner is None else tuple(inner[i] for i in u.arg)
    if op is Ops.PAD:
        inner = u.src[0].shape
        return None if inner is None else tuple(size_sum(s, b, a) for s, (b, a) in zip(inner, u.arg))
    if op is Ops.SHRINK:
        return tuple(shrink_span(b, e) for b, e in u.arg)
    if op is Ops.FLIP:
        return u.src[0].shape
    if op is Ops.MSELECT:
        return part_shape(u)
    if op is Ops.MULTI:
        # the logical shape: n parts of the shard axis side by side (runtime/ir/multi.py)
        part, (axis, devices) = u.src[0].shape, u.arg
        return part if part is None or axis is None else \
            tuple(s * len(devices) if i == axis else s for i, s in enumerate(part))
    if op is Ops.REDUCE_AXIS:
        inner = u.src[0].shape
        return None if inner is None else tuple(1 if i in u.arg[1] else s for i, s in enumerate(inner))
    if op in GroupOp.Elementwise or op is Ops.MSTACK:
        shapes = [s.shape for s in u.src]
        best = None
        for sh in shapes:
            if sh is not None and (best is None or len(sh) > len(best)):
                best = sh
        return best
    return None


def shrink_span(start: Any, end: Any) -> Any:
    """The size of [start, end): an int when it does not depend on a variable's value (`(v, v + 2)` is 2
    long), the end itself for a start of 0, else the SUB of the two."""
    if isinstance(start, int) and start == 0:
        return end
    if not isinstance(end, int) and end.op is Ops.ADD and end.src[0] is start and end.src[1].op is Ops.CONST:
        return end.src[1].arg
    return size_sum(end, (start, -1))


def size_sum(*terms: Any) -> Any:
    """The sum of sizes (ints, or bound variables combined by + and -; `(x, -1)` subtracts x) in one
    canonical form: an int when the variables cancel (`1 + v + (15 - v)` is 16), else the variables in
    name order, added, then subtracted, then the constant. Equal sums are the same (interned) node, so a
    padded kv-cache row and a fixed-size one broadcast together."""
    coeffs: dict[Any, int] = {}
    const = 0
    for t in terms:
        x, sign = t if isinstance(t, tuple) else (t, 1)
        const += _collect_linear(x, sign, coeffs)
    return _rebuild(coeffs, const)


def _collect_linear(x: Any, sign: int, coeffs: dict) -> int:
    """Adds x's variables, times `sign`, into `coeffs`; returns its constant part times `sign`."""
    if isinstance(x, int):
        return sign * x
    if x.op is Ops.CONST:
        return sign * int(x.arg)
    if x.op in (Ops.ADD, Ops.SUB):
        right = sign if x.op is Ops.ADD else -sign
        return _collect_linear(x.src[0], sign, coeffs) + _collect_linear(x.src[1], right, coeffs)
    coeffs[x] = coeffs.get(x, 0) + sign  # a variable (BIND / DEFINE_VAR) or any other size node, kept whole
    return 0


def _rebuild(coeffs: dict, const: int) -> Any:
    items = sorted(((v, c) for v, c in coeffs.items() if c), key=lambda vc: (_var_name(vc[0]), repr(vc[0])))
    if not items:
        return const
    like = items[0][0]  # constants of the variables' dtype (index), built from one of them
    out = None
    for v, c in [vc for vc in items if vc[1] > 0] + ([(like.const_like(const), 1)] if const > 0 else []):
        for _ in range(c):
            out = v if out is None else out + v
    if out is None:
        out = like.const_like(0)
    for v, c in [vc for vc in items if vc[1] < 0] + ([(like.const_like(-const), -1)] if const < 0 else []):
        for _ in range(-c):
            out = out - v
    return out


def _var_name(v: Any) -> str:
    base = v.src[0] if v.op is Ops.BIND else v
    return str(base.arg[0]) if base.op is Ops.DEFINE_VAR else ""


def open_ranges(u: UOp) -> tuple[UOp, ...]:
    """The RANGEs `u` depends on that no node at or below `u` closes (cached per node: `UOp.ranges`)."""
    return u.ranges


def open_ranges_of(n: UOp) -> tuple[UOp, ...]:
    """`n`'s open ranges from its sources' (already cached) open ranges."""
    if not n._mask & _RANGE_BIT:
        return ()
    acc: dict[UOp, None] = {}
    for s in n.src:
        if s._mask & _RANGE_BIT:
            acc.update(dict.fromkeys(s.ranges))
    for closed in closed_ranges(n):
        acc.pop(closed, None)
    if n.op is Ops.RANGE:
        acc[n] = None
    return tuple(acc)


def closed_ranges(n: UOp) -> tuple[UOp, ...]:
    if n.op in (Ops.REDUCE, Ops.BUFFERIZE, Ops.END):
        return n.src[1:]
    if n.op is Ops.STORE:
        return n.src[2:]
    return ()
