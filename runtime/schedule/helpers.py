"""Helpers the scheduler's rule files call from guards and results.

They are pure functions over UOps (no state), registered in runtime/engine/helpers.py
so the rule compiler accepts them by name.
"""
from __future__ import annotations

import math
from typing import Any, Generator

import numpy as np

from rulec.runtime.ir.dtype import DType, PtrDType, dtypes
from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.shape import is_unit_loop
from rulec.runtime.ir.uop import UOp, op_mask, substitute
from rulec.runtime.ir.walk import run_recursive
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.engine.matchers import current
from rulec.runtime.engine.trace import active_trace

# op sets tested against a node's cached op mask (UOp.has_op) instead of walking its subgraph
_COSTLY = op_mask(Ops.REDUCE, Ops.COPY, Ops.ASSIGN)
# what a value reads from memory: a reduce over none of these (a window count, an avg-pool's gradient)
# costs no loads, so recomputing it in each reader is cheaper than a kernel and a buffer
_STORAGE = op_mask(Ops.BUFFER, Ops.BUFFER_VIEW, Ops.BUFFERIZE, Ops.ASSIGN, Ops.COPY, Ops.MSTACK, Ops.MSELECT)
_STORED = op_mask(Ops.BUFFER, Ops.REALIZE, Ops.BUFFERIZE)
_REDUCE_AXIS = op_mask(Ops.REDUCE_AXIS)
_RANGE = op_mask(Ops.RANGE)


def shrink_indices(idxs: tuple[UOp, ...], arg: tuple) -> tuple[UOp, ...]:
    """Indices into a SHRINK's source: shifted by each axis' start."""
    return tuple(i + start if start != 0 else i for i, (start, _) in zip(idxs, arg))


def permute_indices(idxs: tuple[UOp, ...], perm: tuple[int, ...]) -> tuple[UOp, ...]:
    """Indices into a PERMUTE's source: axis k of the source is axis perm.index(k) of the result."""
    inverse = sorted(range(len(perm)), key=lambda k: perm[k])
    return tuple(idxs[k] for k in inverse)


def flip_indices(idxs: tuple[UOp, ...], shape: tuple, flips: tuple[bool, ...]) -> tuple[UOp, ...]:
    return tuple((size - 1) - i if f else i for i, size, f in zip(idxs, shape, flips))


# simplify_index's results, by matcher and expression: each step of a training loop folds the same index
# expressions again (hash-consed, with the same ranges). Bounded: emptied when full
_simplified: dict[tuple[Any, UOp], UOp] = {}
MAX_SIMPLIFIED = 1 << 14


def forget_simplified() -> None:
    _simplified.clear()


def simplify_index(u: UOp) -> UOp:
    """`u` through `index_symbolic`, from the running pipeline's matchers (runtime/engine/matchers.py;
    rulec's own outside a run). Kept, but while a trace records every rewrite."""
    m = current()["index_symbolic"]
    if active_trace() is not None:
        return graph_rewrite(u, m, name="symbolic (index)")
    out = _simplified.get((m, u))
    if out is None:
        out = graph_rewrite(u, m, name="symbolic (index)")
        if len(_simplified) >= MAX_SIMPLIFIED:
            _simplified.clear()
        _simplified[(m, u)] = out
    return out


INVALID = UOp(Ops.INVALID, dtypes.index)  # the index of a lane that reads nothing (padding)


def _idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def _is_zero(i: UOp) -> bool:
    return i.op is Ops.CONST and i.arg == 0


def reshape_indices(idxs: tuple[UOp, ...], out_shape: tuple, in_shape: tuple) -> tuple[UOp, ...]:
    """Indices into a RESHAPE's source: the index linearized over the result's shape, split over the
    source's. Where the reshape only merges or splits dims of plain ranges, adds or drops dims of size 1, or
    flattens, built directly in the form the `symbolic` rules give (no nested rewrite: most reshapes);
    otherwise folded through them."""
    for direct in (_merge_split_indices, _squeeze_indices, _flatten_indices):
        got = direct(idxs, out_shape, in_shape)
        if got is not None:
            return got
    return _folded(idxs, out_shape, in_shape)


def _folded(idxs: tuple[UOp, ...], out_shape: tuple, in_shape: tuple) -> tuple[UOp, ...]:
    """The general case: linearize over `out_shape`, split over `in_shape`, fold through `symbolic`."""
    flat, stride = _idx(0), 1
    for size, i in reversed(list(zip(out_shape, idxs))):
        flat = flat + i * stride
        stride *= size
    parts: list[UOp] = []
    for size in reversed(in_shape):
        parts.append(flat % size)
        flat = flat // size
    return simplify_index(UOp.sink(*parts)).src[::-1] if parts else ()


def _flatten_indices(idxs: tuple[UOp, ...], out_shape: tuple, in_shape: tuple) -> tuple[UOp, ...] | None:
    """`reshape_indices` without rewriting when the source has one dim of size > 1 (a flatten), and the
    result is indexed with ranges of the dims' own sizes, 0, or ranges of one iteration on size-1 dims.
    The rules fold what is provably 0: a product with a range of one iteration, and a partial sum of such
    ranges; a lone range of one iteration stays a term."""
    ins = [d for d in in_shape if d != 1]
    if len(ins) != 1 or not all(type(d) is int and d > 0 for d in (*out_shape, *in_shape)):
        return None
    flat: UOp | None = None
    zero_sum = True  # whether every term so far is a range of one iteration (the sum's bounds are [0, 0])
    stride = 1
    for size, i in reversed(list(zip(out_shape, idxs))):
        st, stride = stride, stride * size
        if _is_zero(i):
            continue
        if not _plain_range(i, size):
            # a merge of ranges (a reshape above merged dims) is the innermost term as it is
            if not (st == 1 and flat is None and _mixed_radix(i, size)):
                return None
            flat, zero_sum = i, False
            continue
        unit = size == 1
        if unit and st != 1:
            continue  # a product with a range of one iteration folds to 0
        term = i if st == 1 else i * st
        if flat is None:
            flat, zero_sum = term, unit
        elif zero_sum and unit:
            flat = None  # a sum of ranges of one iteration folds to 0
        else:
            flat, zero_sum = flat + term, False
    if stride != ins[0]:
        return None
    return tuple(_idx(0) if d == 1 else (_idx(0) if flat is None else flat) for d in in_shape)


def _plain_range(i: UOp, size: int) -> bool:
    return i.op is Ops.RANGE and i.src[0].op is Ops.CONST and i.src[0].arg == size


def _mixed_radix(i: UOp, size: int) -> bool:
    """Whether `i` is a merge of plain ranges as `_merge_split_indices` builds it, covering a dim of `size`:
    r0 + r1 * n0 + r2 * (n0 * n1) + ..., inner ranges first (the form the rules leave such a sum in)."""
    terms: list[UOp] = []
    while i.op is Ops.ADD:
        i, last = i.src
        terms.append(last)
    terms.append(i)
    terms.reverse()
    if len(terms) < 2:
        return False
    stride = 1
    for k, t in enumerate(terms):
        if k:
            if t.op is not Ops.MUL or t.src[1].op is not Ops.CONST or t.src[1].arg != stride:
                return False
            t = t.src[0]
        if t.op is not Ops.RANGE or t.src[0].op is not Ops.CONST or t.src[0].arg < 2:
            return False
        stride *= t.src[0].arg
    return stride == size


def _digit(i: UOp, size: int) -> bool:
    """Whether `i` is one digit of a plain range that a reshape above split, r // c, r % n or (r // c) % n,
    spanning a dim of `size` (the rules leave these as they are)."""
    x, divisors = i, []
    for op in (Ops.MOD, Ops.IDIV):
        if x.op is op:
            x, d = x.src
            divisors.append(d)
    return bool(divisors) and all(d.op is Ops.CONST for d in divisors) and x.op is Ops.RANGE \
        and x.src[0].op is Ops.CONST and i.vmin == 0 and i.vmax == size - 1


def _squeeze_indices(idxs: tuple[UOp, ...], out_shape: tuple, in_shape: tuple) -> tuple[UOp, ...] | None:
    """`reshape_indices` without rewriting, for a reshape that only adds or drops dims of size 1 (0 on the
    dropped ones), indexed with plain ranges, merges of them and digits of them: the indices pass through
    as they are (the rules fold the flat index back to each)."""
    if not all(type(d) is int for d in (*out_shape, *in_shape)):
        return None
    if [d for d in out_shape if d != 1] != [d for d in in_shape if d != 1]:
        return None
    kept = []
    for size, i in zip(out_shape, idxs):
        if size == 1:
            if not _is_zero(i):
                return None
        elif _plain_range(i, size) or _mixed_radix(i, size) or _digit(i, size):
            kept.append(i)
        else:
            return None
    it = iter(kept)
    return tuple(_idx(0) if d == 1 else next(it) for d in in_shape)


def _merge_split_indices(idxs: tuple[UOp, ...], out_shape: tuple, in_shape: tuple) -> tuple[UOp, ...] | None:
    """`reshape_indices` without rewriting, for a reshape of constant shapes that only merges or splits
    dims, indexed with ranges of the dims' own sizes (or 0 on size-1 dims); None in any other case (the
    rules fold ranges of one iteration by their bounds in ways that depend on the whole sum)."""
    if not all(type(d) is int and d > 0 for d in (*out_shape, *in_shape)):
        return None
    # the result's dims of size > 1, innermost first: (size, stride in the flat index, index)
    dims, stride = [], 1
    for size, i in reversed(list(zip(out_shape, idxs))):
        if not (_is_zero(i) or (size > 1 and _plain_range(i, size))):
            return None
        if size > 1:
            dims.append((size, stride, i))
        stride *= size
    ins = [size for size in reversed(in_shape) if size != 1]  # innermost first
    new: list[UOp] = []  # innermost first
    d = k = 0
    while d < len(dims) or k < len(ins):
        if d >= len(dims) or k >= len(ins):
            return None
        # the smallest run of result dims and source dims with the same number of elements
        de, ke, po, pi = d + 1, k + 1, dims[d][0], ins[k]
        while po != pi:
            if pi < po:
                if ke >= len(ins):
                    return None
                pi *= ins[ke]
                ke += 1
            else:
                if de >= len(dims):
                    return None
                po *= dims[de][0]
                de += 1
        if ke == k + 1:
            # one source dim split into several: its index is the sum of theirs times their strides
            base, flat = dims[d][1], None
            for _, st, i in dims[d:de]:
                if _is_zero(i):
                    continue  # the rules fold a zero term away
                term = i if st == base else i * (st // base)
                flat = term if flat is None else flat + term
            new.append(_idx(0) if flat is None else flat)
        elif de == d + 1:
            # several source dims merged into one: each source index is one digit of the result's index
            i, st = dims[d][2], 1
            for n, size in enumerate(ins[k:ke]):
                if _is_zero(i):
                    new.append(i)
                    continue
                digit = i if st == 1 else i // st
                new.append(digit if n == ke - k - 1 else digit % size)
                st *= size
        else:
            return None
        d, k = de, ke
    it = iter(new)
    return tuple(_idx(0) if size == 1 else next(it) for size in reversed(in_shape))[::-1]


def pad_indices(idxs: tuple[UOp, ...], shape: tuple, pads: tuple) -> tuple[UOp, ...]:
    """Indices into a PAD's source: shifted back by each axis' padding; invalid in the padding."""
    out = list(idxs)
    for ax, (valid, before) in _pad_axes(idxs, shape, pads):
        out[ax] = simplify_index(valid.where(idxs[ax] - before, INVALID))
    return tuple(out)


def pad_valid(idxs: tuple[UOp, ...], shape: tuple, pads: tuple) -> UOp:
    """Whether an index of a PAD's result is inside the source (lanes in the padding read 0)."""
    valid_all = UOp.const(dtypes.bool, True)
    for _, (valid, _) in _pad_axes(idxs, shape, pads):
        valid_all = valid_all & valid
    return simplify_index(valid_all)


def _pad_axes(idxs: tuple[UOp, ...], shape: tuple, pads: tuple) -> list[tuple[int, tuple[UOp, Any]]]:
    """Per padded axis: its index's validity (before <= i < size - after) and its padding before."""
    out = []
    for ax, (size, (before, after)) in enumerate(zip(shape, pads)):
        # a symbolic amount (`10 - n` after a symbolic slice written back into its base) may be 0 or not:
        # its bound is always checked
        pad_before, pad_after = (not isinstance(v, int) or v > 0 for v in (before, after))
        if not (pad_before or pad_after):
            continue
        valid = UOp.const(dtypes.bool, True)
        if pad_after:
            valid = valid & (idxs[ax] < size - after)
        if pad_before:
            valid = valid & (idxs[ax] > before - 1)  # i >= before, as one CMPLT
        out.append((ax, (valid, before)))
    return out


def expand_indices(idxs: tuple[UOp, ...], in_shape: tuple, out_shape: tuple) -> tuple[UOp, ...]:
    """Indices into an EXPAND's source: broadcast axes read index 0."""
    return tuple(i if a == b else _idx(0) for i, a, b in zip(idxs, in_shape, out_shape))


def expand_end(idxs: tuple[UOp, ...], in_shape: tuple, out_shape: tuple, end: Any) -> Any:
    """The newest range an EXPAND ends (the INDEX's arg, for `axes_to_end` below): the ranges its broadcast
    axes are indexed with, and the one an expand above ended (`end`). A range that a kept axis reads too
    still counts: in sliding windows (`_pool`: an expand, then reshapes that merge the broadcast axis with a
    kept one) both axes read the window's ranges, and a reduce read there must be stored, or a chain of
    convolutions recomputes every earlier one per window place (as tinygrad 0.14 decides)."""
    ends = [r.arg for i, a, b in zip(idxs, in_shape, out_shape) if a != b and i.has_op(_RANGE) for r in _ranges_in(i)]
    if end is not None:
        ends.append(end)
    return min(ends) if ends else None


def unindexed(x: UOp) -> UOp:
    """The rule for an INDEX that no rule rewrote: a scheduler bug, reported with the op it indexes."""
    raise RuntimeError(f"rangeify: INDEX of {x.src[0].op.name} was not rewritten by any rule")


def index_each(srcs: tuple[UOp, ...], idxs: tuple[UOp, ...]) -> tuple[UOp, ...]:
    """Every source indexed with the same indices."""
    return tuple(UOp(Ops.INDEX, s.dtype, (s, *idxs)) for s in srcs)


def const_shaped(like: UOp, value: Any) -> UOp:
    """A constant with the shape and dtype of `like`, as a broadcast scalar."""
    c = UOp.const(like.dtype.scalar, value)
    shape = like.shape or ()
    if not shape:
        return c
    return UOp(Ops.EXPAND, c.dtype, (UOp(Ops.RESHAPE, c.dtype, (c,), (1,) * len(shape)),), tuple(shape))


def merge_tags(a: Any, b: Any) -> tuple | None:
    merged = (a or ()) + (b or ())
    return merged or None


def cheap_to_recompute(src: UOp, buf: UOp, idx: UOp) -> bool:
    """Whether reading `buf` at `idx` may recompute `src` instead (the buffer-removal cost model).

    Never for a user's contiguous; never when the computation reads more than
    MAX_INLINED_READS buffers, or holds a copy, an assign, or a reduce that reads
    memory (those are the expensive parts worth storing). A reduce of values computed from indices and constants alone (the
    window count of an avg-pool's gradient) is recomputed, as tinygrad 0.14 does.
    """
    if len(buf.src) != len(idx.src) or any(r.op is not Ops.RANGE for r in buf.src[1:]):
        return False
    if src.op is Ops.CONTIGUOUS:
        return False
    if src.op is Ops.THREEFRY:
        return True
    ran = src.toposort(gate=lambda x: x.op is not Ops.INDEX)
    if len({x.src[0] for x in ran if x.op is Ops.INDEX}) > MAX_INLINED_READS:
        return False
    if not src.has_op(_COSTLY):
        return True
    return not any(x.op in (Ops.COPY, Ops.ASSIGN) or (x.op is Ops.REDUCE and x.src[0].has_op(_STORAGE))
                   for x in ran)


# a value that reads more buffers than this is stored, not recomputed where it is read (tinygrad 0.14's
# limit): a reader that reads it many times over, as a convolution's input gradient reads the gradient
# of its output once per tap of the window, would recompute all of it each time (a batchnorm gradient:
# six buffers, a square root and a power per tap)
MAX_INLINED_READS = 3


def substitute_all(root: UOp, old: tuple[UOp, ...], new: tuple[UOp, ...]) -> UOp:
    """`root` with each of `old` replaced by its partner in `new`.

    Replacing ranges, the walk enters only nodes where one of them is open: ranges are allocated fresh
    for each loop nest, so a range is not found below the node that closes it (or a node without it open).
    """
    mapping = dict(zip(old, new))
    if all(o.op is Ops.RANGE for o in old):
        keys = set(old)
        return substitute(root, mapping, lambda x: not keys.isdisjoint(x.ranges))
    return substitute(root, mapping)


def picked_in_range(e: UOp, r: UOp) -> UOp:
    """Whether the integer `e` names a lane of the range `r` (0 <= e < n): where a one-hot pick over `r`
    (`sum over r of where(e == r, v, 0)`) finds its one lane."""
    n = UOp.const(e.dtype, r.src[0].arg)
    return (e < n) & (UOp.const(e.dtype, -1) < e)


def picked_value(v: UOp, r: UOp, e: UOp, valid: UOp) -> UOp:
    """`v` at the lane r = e of a one-hot pick, its indices gated by `valid` (an index past the range reads
    nothing, as padding does)."""
    at = valid.where(e.cast(dtypes.index), INVALID)
    return simplify_index(substitute_all(v, (r,), (at,)))


def axes_to_end(idx: UOp) -> tuple[int, ...] | None:
    """Which axes of an INDEX must close their loops before a reduce below is recomputed in them.

    `idx.arg` is the newest range an expand ended on the way here. Only a graph that
    reads a buffer and holds a reduce is worth buffering; then every axis whose index
    uses a range newer (inner) than that one must end. None: nothing to decide here.
    """
    if idx.arg is None or not idx.has_op(_STORED) or not idx.has_op(_REDUCE_AXIS):
        return None
    return tuple(i for i, a in enumerate(idx.src[1:])
                 if a.has_op(_RANGE) and any(u.arg > idx.arg for u in _ranges_in(a)))


def _ranges_in(u: UOp) -> list[UOp]:
    """The RANGE nodes at or below `u`, sources first (from the cached parents, without copying them)."""
    found = [x for x in u.parents if x.op is Ops.RANGE]
    if u.op is Ops.RANGE:
        found.append(u)
    return found


def _as_tuple(ranges: UOp | tuple[UOp, ...]) -> tuple[UOp, ...]:
    return (ranges,) if isinstance(ranges, UOp) else tuple(ranges)


def independent_of(x: UOp, ranges: UOp | tuple[UOp, ...]) -> bool:
    """True when none of `ranges` (one range or a tuple) is open in `x`: it is the same in every iteration.

    A range closed below `x` (by a reduce inside it) does not make `x` vary. Open ranges are cached per node
    (`UOp.ranges`): a walk below every reduce would be quadratic on a deep graph."""
    if not x.has_op(_RANGE):
        return True
    open_here = x.ranges
    return not any(r in open_here for r in _as_tuple(ranges))


def trip_count(ranges: UOp | tuple[UOp, ...]) -> int | None:
    """How many times a loop nest over `ranges` runs its body; None when a size is symbolic."""
    n = 1
    for r in _as_tuple(ranges):
        size = r.src[0] if r.op is Ops.RANGE else None
        if size is None or size.op is not Ops.CONST:
            return None
        n *= size.arg
    return n


def sum_commutes_with_cast(c: UOp, ranges: UOp | tuple[UOp, ...]) -> bool:
    """Whether summing CAST(x) over `ranges` equals CAST of the sum of x (both integer dtypes).

    Integer sums wrap, so the two agree modulo 2**bits of the cast's dtype when it is no wider than
    the source. A widening cast keeps values the narrower sum would wrap: it commutes only when that
    sum cannot overflow (the source's bounds times the trip count fit the source dtype)."""
    src, dst = c.src[0].dtype.scalar, c.dtype.scalar
    if not (src.is_int and dst.is_int):
        return False
    if dst.itemsize <= src.itemsize:
        return True
    n = trip_count(_as_tuple(ranges))
    from rulec.runtime.engine.helpers import fits_dtype  # helpers.py imports this module

    return n is not None and fits_dtype(src, c.src[0].vmin * n, c.src[0].vmax * n)


_AFFINE_OPS = (Ops.ADD, Ops.SUB, Ops.NEG, Ops.MUL)


def affine_in(x: UOp, ranges: UOp | tuple[UOp, ...]) -> bool:
    """True when the integer expression `x` is a sum of terms, each free of `ranges` or one of them times
    a factor free of them: a sum of it over the ranges has a closed form. Integer casts are allowed
    where the sum commutes with them (`sum_commutes_with_cast`)."""
    ranges = _as_tuple(ranges)

    def walk(u: UOp) -> Generator[UOp, bool, bool]:  # `yield s` is walk(s), see run_recursive
        if not u.dtype.scalar.is_int:
            return False
        if u in ranges or independent_of(u, ranges):
            return True
        if u.op is Ops.MUL:
            a, b = u.src
            return (independent_of(a, ranges) and (yield b)) or (independent_of(b, ranges) and (yield a))
        if u.op is Ops.CAST:
            return sum_commutes_with_cast(u, ranges) and (yield u.src[0])
        if u.op in _AFFINE_OPS:
            for s in u.src:
                if not (yield s):
                    return False
            return True
        return False

    return run_recursive(walk, x)


def used_or_longer_ranges(store: UOp) -> tuple[UOp, ...]:
    """The ranges a STORE closes, less those of one iteration that neither its target nor its value reads."""
    unit = [r for r in store.src[2:] if is_unit_loop(r)]
    if not unit:  # the usual case: no need to look at what the store reads
        return store.src[2:]
    target, value = store.src[0], store.src[1]
    return tuple(r for r in store.src[2:] if r not in unit or target.reaches(r) or value.reaches(r))


def buffer_under(u: UOp) -> UOp | None:
    """The BUFFER that a view of a buffer, or of an assign to one, reads; None for a computed value."""
    while u.op in GroupOp.Movement or u.op is Ops.ASSIGN:
        u = u.src[0]
    return u if u.op is Ops.BUFFER else None


# what a copy's source cannot be rebuilt from on another device: storage, or a user's contiguous
_NOT_RECOMPUTABLE = _STORAGE | op_mask(Ops.CONTIGUOUS, Ops.REALIZE, Ops.MULTI, Ops.THREEFRY)


def computed_on(x: UOp, device: UOp, tag: Any) -> UOp | None:
    """`x` computed on `device` instead of copied there, when it is computed from constants alone (its
    constants' DEVICE becomes `device`), tagged `tag` (the copy's); None when it reads anything stored,
    or has no placed constant."""
    if x.has_op(_NOT_RECOMPUTABLE) or not isinstance(device.arg, str):
        return None
    order = x.toposort()
    if not any(u.op is Ops.DEVICE for u in order):
        return None
    rebuilt: dict[UOp, UOp] = {}
    for u in order:  # sources first; tensors' tags stay on the originals, which other readers still use
        rebuilt[u] = device if u.op is Ops.DEVICE else u.replace(src=tuple(rebuilt[s] for s in u.src), tag=None)
    return rebuilt[x].replace(tag=tag)


def can_carry_tag(x: UOp) -> bool:
    """Whether a tensor folded onto `x` (an identity: `x * 1`) keeps its tag through the schedule: a computed
    value or a view of a buffer or a constant does; a view of a computed value does not (untag-movement)."""
    return x.op not in GroupOp.Movement or buffer_under(x) is not None or x.base.op is Ops.CONST


# ops whose sources are read at the op's own index
_SAME_INDEX = GroupOp.Elementwise | {Ops.NOOP}


def reads_target_elsewhere(target: UOp, value: UOp) -> bool:
    """Whether an assign's `value` reads the target's buffer at an index other than the one it stores to.

    Elementwise ops read their sources at their own index. A read of the target's storage through
    movement ops (`a[1:].assign(a[1:] * 2)` as an assign to the whole of `a`: the value pads a shrink of
    `a` back into place) is at the store's own index when the movement ops map every element they read
    onto the element the store writes: decided exactly, by applying them to the flat indices of the
    buffer (`_flat_reads`). A reduce, another version of the buffer (a pending assign to it), or a
    symbolic shape reads it elsewhere. Realized nodes (contiguous, copies, other buffers) are other
    kernels: not looked into.
    """
    buf = buffer_under(target)
    if buf is None:
        return False
    stores: np.ndarray | None = None
    seen: set[tuple[UOp, tuple[UOp, ...] | None]] = set()
    # (node, the movement ops between it and the value, innermost first; None once a reduce is passed)
    stack: list[tuple[UOp, tuple[UOp, ...] | None]] = [(value, ())]
    while stack:
        u, path = stack.pop()
        if (u, path) in seen:
            continue
        seen.add((u, path))
        if u is target and path == ():
            continue
        if buffer_under(u) is buf:
            if path is None:
                return True
            if stores is None:
                stores = _flat_reads(target, ())
            reads = _flat_reads(u, path)
            if stores is None or reads is None or _storage(u) is not _storage(target):
                return True
            if reads.shape != stores.shape or np.any((reads >= 0) & (reads != stores)):
                return True
        elif u.op not in GroupOp.AlwaysContiguous:
            if path is not None and u.op in GroupOp.Movement:
                stack.append((u.src[0], (u, *path)))
            else:
                keep = path if path is not None and u.op in _SAME_INDEX else None
                stack.extend((s, keep) for s in u.src)
    return False


def reads(value: UOp, buf: UOp | None) -> bool:
    """Whether `value` reads `buf` (a BUFFER) anywhere in its graph; False for None."""
    return buf is not None and value.reaches(buf)


def splat_of(u: UOp) -> Any:
    """The value of `u` when every element of it is one Python-scalar constant (a CONST without a DEVICE,
    seen through movement ops other than PAD, whose padding holds zeros); None otherwise. A constant with
    a DEVICE is not one: an identity that drops it would drop the device of the result."""
    while u.op in GroupOp.Movement and u.op is not Ops.PAD:
        u = u.src[0]
    return u.arg if u.op is Ops.CONST and not u.src else None


def splat_is_plus_zero(u: UOp) -> bool:
    """Whether every element of `u` is the constant 0 (as `splat_of`), and not the float -0.0: x - 0.0 is x
    for every float, x - (-0.0) is not (-0.0 - (-0.0) is 0.0)."""
    v = splat_of(u)
    return v == 0 and not (isinstance(v, float) and math.copysign(1.0, v) < 0)


def same_but_tags(a: UOp, b: UOp) -> bool:
    """Whether `a` and `b` are the same node but for their tags (the tensors numbered onto them)."""
    return a.replace(tag=None) is b.replace(tag=None)


def _storage(u: UOp) -> UOp:
    """The version of a buffer a view reads: the BUFFER below its movement ops, or a pending ASSIGN."""
    while u.op in GroupOp.Movement:
        u = u.src[0]
    return u


# the most elements whose reads `_flat_reads` enumerates; larger values count as read elsewhere
FLAT_READS_LIMIT = 1 << 22


def _flat_reads(view: UOp, path: tuple[UOp, ...]) -> np.ndarray | None:
    """For every element of `path` applied to `view` (a view of a buffer; `path` innermost first), the
    flat buffer index it reads, or -1 for padding. None when a shape is symbolic or too large."""
    chain: list[UOp] = []
    u = view
    while u.op in GroupOp.Movement or u.op is Ops.ASSIGN:
        if u.op in GroupOp.Movement:
            chain.append(u)
        u = u.src[0]
    if u.op is not Ops.BUFFER or not isinstance(u.arg, int) or u.arg > FLAT_READS_LIMIT:
        return None
    x = np.arange(u.arg, dtype=np.int64)
    for op in [*reversed(chain), *path]:  # from the buffer up
        if not all(isinstance(d, int) for d in (op.shape or ())) or op.size > FLAT_READS_LIMIT:
            return None
        x = _move(x, op)
        if x is None:
            return None
    return x


def _move(x: np.ndarray, op: UOp) -> np.ndarray | None:
    """One movement op applied to an array of flat indices (padding reads -1)."""
    arg = op.arg
    if op.op is Ops.RESHAPE:
        return x.reshape(arg)
    if op.op is Ops.EXPAND:
        return np.broadcast_to(x, arg)
    if op.op is Ops.PERMUTE:
        return x.transpose(arg)
    if op.op is Ops.FLIP:
        return np.flip(x, tuple(i for i, f in enumerate(arg) if f))
    if op.op is Ops.SHRINK:
        if not all(isinstance(v, int) for pair in arg for v in pair):
            return None
        return x[tuple(slice(s, e) for s, e in arg)]
    if op.op is Ops.PAD:
        if not all(isinstance(v, int) for pair in arg for v in pair):
            return None
        return np.pad(x, arg, constant_values=-1)
    return None


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _is_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether (shape, strides) walks its elements one after another (axes of size 1 have any stride)."""
    return all(st == want for d, st, want in zip(shape, strides, _contiguous_strides(shape)) if d != 1)


def contiguous_run_of(view: UOp) -> int | None:
    """The flat element offset where `view` (movement ops on a BUFFER) starts, when it reads the buffer's
    elements offset, offset+1, ... in order (a slice of whole rows, a reshape of one); None for any other
    view, a symbolic shape, or one past FLAT_READS_LIMIT elements (a copy checks its reads lane by lane).
    Tracked as (shape, strides, offset) from the buffer up: SHRINK moves the offset, PERMUTE the strides,
    RESHAPE keeps a dense run dense; anything else is not followed."""
    chain: list[UOp] = []
    u = view
    while u.op in GroupOp.Movement:
        chain.append(u)
        u = u.src[0]
    if u.op is not Ops.BUFFER or not isinstance(u.arg, int) or not chain:
        return None
    if not all(isinstance(d, int) for op in chain for d in (op.shape or ())) or view.size > FLAT_READS_LIMIT:
        return None
    shape, strides, offset = (u.arg,), (1,), 0
    for op in reversed(chain):
        if op.op is Ops.SHRINK and all(isinstance(v, int) for pair in op.arg for v in pair):
            offset += sum(start * st for (start, _), st in zip(op.arg, strides))
            shape = tuple(end - start for start, end in op.arg)
        elif op.op is Ops.PERMUTE:
            shape, strides = tuple(shape[k] for k in op.arg), tuple(strides[k] for k in op.arg)
            continue
        elif op.op is Ops.RESHAPE and _is_dense(shape, strides):
            shape = tuple(op.arg)
            strides = _contiguous_strides(shape)
            continue
        else:
            return None
    return offset if _is_dense(shape, strides) else None


def is_pointer(dt: DType) -> bool:
    return isinstance(dt, PtrDType)


SCHEDULE_HELPERS = {
    "shrink_indices": shrink_indices, "permute_indices": permute_indices, "flip_indices": flip_indices,
    "index_each": index_each, "const_shaped": const_shaped, "merge_tags": merge_tags,
    "cheap_to_recompute": cheap_to_recompute, "substitute_all": substitute_all, "is_pointer": is_pointer,
    "axes_to_end": axes_to_end, "independent_of": independent_of, "affine_in": affine_in,
    "sum_commutes_with_cast": sum_commutes_with_cast, "used_or_longer_ranges": used_or_longer_ranges,
    "reads_target_elsewhere": reads_target_elsewhere, "buffer_under": buffer_under,
    "same_but_tags": same_but_tags, "reads": reads, "splat_of": splat_of, "can_carry_tag": can_carry_tag,
    "splat_is_plus_zero": splat_is_plus_zero,
    "reshape_indices": reshape_indices, "pad_indices": pad_indices, "pad_valid": pad_valid,
    "expand_indices": expand_indices, "expand_end": expand_end, "unindexed": unindexed,
    "trip_count": trip_count, "contiguous_run_of": contiguous_run_of,
    "picked_in_range": picked_in_range, "picked_value": picked_value, "computed_on": computed_on,
}
