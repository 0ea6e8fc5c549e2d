"""The numpy reference interpreter of kernel ASTs: the oracle every backend is checked against.

A kernel is a SINK of `STORE(INDEX(DEFINE_GLOBAL, idx), value, *ranges)` (docs/tensor-ir.md,
"Kernel level"). Evaluation is vectorized, not a Python loop over iterations:

* every RANGE of the kernel owns one numpy axis; every node evaluates (once, in toposort order)
  to an array with one axis per RANGE, of size 1 on the axes of ranges it does not depend on,
  so numpy broadcasting lines the iterations up;
* REDUCE reduces over the axes of its ranges with keepdims, so the result stays aligned;
* LOAD gathers with fancy indexing; STORE scatters. An index `WHERE(valid, idx, INVALID)` masks lanes:
  masked loads read 0, masked stores write nothing, and masked lanes are never bounds-checked;
* all STOREs are evaluated before any is written, so every load sees the buffers as they were
  when the kernel started (stores of one kernel land in SINK order).

Dtypes: arithmetic happens in the node's dtype (ints wrap like C unsigned / two's complement).
`index` is int64. `bfloat16` is stored in float32 arrays, but every bfloat16 result is rounded
to bfloat16 precision (round to nearest even), so values match a real bfloat16 backend that
computes each op in float and rounds back. What each ALU op computes is runtime/ir/alu.py's table
(IDIV and MOD truncate toward zero as in C; integer division by zero gives 0 instead of trapping,
since a masked lane may legally compute it; MAX propagates NaN); the array forms are
runtime/interpret/alu_numpy.py's, shared with the tensor-level evaluator (runtime/interpret/lazy_eval.py).

The C-like printer of kernels, `kernel_text`, is in backends/kernel_text.py.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from rulec.runtime.ir.alu import reduce_identity
from rulec.runtime.interpret.alu_numpy import ARRAY, REDUCE
from rulec.runtime.ir.dtype import DType, PtrDType, dtypes
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.shape import open_ranges, prod
from rulec.runtime.ir.uop import UOp, pretty

# Largest array (in elements) one node may materialize: 2**27 float32s are 512 MiB.
MAX_ELEMENTS = 2**27
# numpy >= 1.26 supports at least 32 dimensions (2.x: 64); one axis per RANGE.
MAX_RANGES = 32


class InterpretError(RuntimeError):
    """The kernel cannot be run: malformed IR, a missing variable, or a scheduler bug."""


class OutOfBoundsError(InterpretError, IndexError):
    """A LOAD or STORE reached outside its buffer on a lane that is not masked."""


# ----------------------------------------------------------------------------- dtypes


def np_dtype(dt: DType) -> np.dtype:
    """The numpy dtype that holds values of `dt`: the buffer store's (bfloat16 in float32, index in int64)."""
    from rulec.runtime.buffers import numpy_dtype

    try:
        return numpy_dtype(dt.scalar)
    except ValueError as e:
        raise InterpretError(str(e)) from None


def _round_bf16(x: np.ndarray) -> np.ndarray:
    # keep the top 16 bits of the float32, rounding to nearest even; NaN stays NaN
    bits = np.require(x, np.float32, "C").view(np.uint32)  # not ascontiguousarray: it makes a 0-d array 1-d
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000))
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def _as_dtype(x: Any, dt: DType) -> np.ndarray:
    """`x` as an array holding values of `dt` (wrapping or truncating like C casts)."""
    with np.errstate(all="ignore"):
        out = np.asarray(x).astype(np_dtype(dt), copy=False)
    return _round_bf16(out) if dt.scalar.name == "bfloat16" else out


# ----------------------------------------------------------------------------- ALU


def _operands(u: UOp, src: list[np.ndarray]) -> list[np.ndarray]:
    """The sources converted to the dtype the op computes in."""
    if u.op is Ops.CAST or u.op is Ops.BITCAST:
        return src
    if u.op is Ops.WHERE:
        return [_as_dtype(src[0], dtypes.bool), _as_dtype(src[1], u.dtype), _as_dtype(src[2], u.dtype)]
    # comparisons compute in their operands' dtype, everything else in the result's
    dt = u.src[0].dtype if u.op in GroupOp.Comparison else u.dtype
    return [_as_dtype(s, dt) for s in src]


def _bitcast(x: np.ndarray, u: UOp) -> np.ndarray:
    src_dt, dst_dt = u.src[0].dtype.scalar, u.dtype.scalar
    if "bfloat16" in (src_dt.name, dst_dt.name) or src_dt.itemsize != dst_dt.itemsize:
        raise InterpretError(f"unsupported BITCAST {src_dt.name} -> {dst_dt.name}: {short_text(u)}")
    return np.require(x, np_dtype(src_dt), "C").view(np_dtype(dst_dt))  # keeps a 0-d array 0-d


# ----------------------------------------------------------------------------- evaluation

_INVALID = object()  # the value of an INVALID node; only an index WHERE may consume it


@dataclass
class _Gated:
    """`WHERE(valid, idx, INVALID)`: an index that exists only where `valid` holds."""
    valid: np.ndarray
    idx: np.ndarray


@dataclass
class _Buf:
    node: UOp  # the DEFINE_GLOBAL
    array: np.ndarray
    limit: int  # indices must lie in [0, limit)

    def describe(self) -> str:
        return f"buffer {self.node.arg} (DEFINE_GLOBAL arg={self.node.arg}, {self.node.dtype.scalar.name}, " \
               f"{self.limit} elements)"


@dataclass
class _Ref:
    """An evaluated INDEX: the buffer, the flat indices and the lane mask (None: every lane)."""
    node: UOp
    buf: _Buf
    idx: np.ndarray
    valid: np.ndarray | None


@dataclass
class _Write:
    buf: np.ndarray
    idx: np.ndarray  # flat, masked lanes removed
    values: np.ndarray


def short_text(u: UOp, limit: int = 300) -> str:
    """`u` on one line, cut at `limit` characters: how errors quote a node."""
    text = " ".join(pretty(u).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def range_name(r: UOp) -> str:
    """`r3` for the RANGE numbered 3: the name errors and kernel_text give a loop variable."""
    return f"r{r.arg[0]}" if isinstance(r.arg, tuple) and r.arg else f"r{r.arg}"


class _Kernel:
    def __init__(self, ast: UOp, buffers: list[np.ndarray], var_vals: dict[str, int]):
        self.topo = list(ast.toposort())
        self.ranges = [u for u in self.topo if u.op is Ops.RANGE]
        if len(self.ranges) > MAX_RANGES:
            raise InterpretError(f"kernel has {len(self.ranges)} ranges; the interpreter supports {MAX_RANGES}")
        self.axis = {r: i for i, r in enumerate(self.ranges)}
        self.extent: dict[UOp, int] = {}
        self.buffers, self.var_vals = buffers, var_vals
        self.writes: list[_Write] = []

    def run(self) -> list[_Write]:
        vals: dict[UOp, Any] = {}
        uses = Counter(s for u in self.topo for s in u.src)
        for u in self.topo:
            vals[u] = self.eval(u, [vals[s] for s in u.src])
            for s in u.src:  # free intermediates as soon as their last user ran
                uses[s] -= 1
                if uses[s] == 0:
                    del vals[s]
        return self.writes

    def eval(self, u: UOp, src: list[Any]) -> Any:
        op = u.op
        if op is Ops.CONST:
            return _as_dtype(np.array(u.arg).reshape((1,) * len(self.axis)), u.dtype)
        if op is Ops.DEFINE_VAR:
            return _as_dtype(np.full((1,) * len(self.axis), self.var(u)), u.dtype)
        if op is Ops.RANGE:
            return self.range(u, src[0])
        if op is Ops.DEFINE_GLOBAL:
            return self.buffer(u)
        if op is Ops.INVALID:
            return _INVALID
        if op is Ops.WHERE and src[2] is _INVALID:
            return self.gate(u, src)
        if op is Ops.INDEX:
            return self.index(u, src)
        if op is Ops.LOAD:
            return self.load(u, src)
        if op is Ops.REDUCE:
            return self.reduce(u, src)
        if op is Ops.STORE:
            self.writes.append(self.store(u, src))
            return None
        if op is Ops.SINK:
            return None
        if op in GroupOp.ALU or op is Ops.CAST or op is Ops.BITCAST:
            return self.alu(u, src)
        raise InterpretError(f"the interpreter does not run {op.name} nodes: {short_text(u)}")

    # --- helpers

    def array(self, u: UOp, v: Any, what: str = "operand") -> np.ndarray:
        if isinstance(v, np.ndarray):
            return v
        kind = "INVALID" if v is _INVALID or isinstance(v, _Gated) else "a pointer or statement"
        raise InterpretError(f"{u.op.name} got {kind} as its {what}; INVALID may only appear as "
                             f"WHERE(valid, idx, INVALID) directly under an INDEX: {short_text(u)}")

    def guard(self, u: UOp, shape: tuple[int, ...]) -> None:
        n = prod(shape)
        if n > MAX_ELEMENTS:
            dims = ", ".join(f"{range_name(r)}={shape[i]}" for r, i in self.axis.items() if shape[i] > 1)
            raise InterpretError(f"{u.op.name} needs an array of {n} elements ({dims}), more than the "
                                 f"interpreter's limit of {MAX_ELEMENTS}: {short_text(u)}")

    def shape_of(self, ranges: tuple[UOp, ...]) -> tuple[int, ...]:
        shape = [1] * len(self.axis)
        for r in ranges:
            shape[self.axis[r]] = self.extent[r]
        return tuple(shape)

    def check_ranges(self, u: UOp, ranges: tuple[UOp, ...]) -> None:
        for r in ranges:
            if r.op is not Ops.RANGE:
                raise InterpretError(f"{u.op.name} closes a {r.op.name}, not a RANGE: {short_text(u)}")

    # --- leaves

    def var(self, u: UOp) -> int:
        name, lo, hi = u.arg
        if name not in self.var_vals:
            raise InterpretError(f"no value for variable {name!r} (var_vals has {sorted(self.var_vals)})")
        v = self.var_vals[name]
        if not lo <= v <= hi:
            raise InterpretError(f"variable {name!r} = {v} is outside its declared range [{lo}, {hi}]")
        return v

    def range(self, u: UOp, end: Any) -> np.ndarray:
        end = self.array(u, end, "extent")
        if end.size != 1:
            raise InterpretError(f"the extent of {range_name(u)} depends on another range: {short_text(u)}")
        n = max(int(end.reshape(-1)[0]), 0)  # a negative extent runs no iterations, like a C loop
        self.guard(u, (n,))
        self.extent[u] = n
        return np.arange(n, dtype=np.int64).reshape(self.shape_of((u,)))

    def buffer(self, u: UOp) -> _Buf:
        i = u.arg
        if not isinstance(i, int) or not 0 <= i < len(self.buffers):
            raise InterpretError(f"kernel uses buffer {i!r} but {len(self.buffers)} buffers were passed")
        arr = self.buffers[i]
        if not isinstance(arr, np.ndarray) or arr.ndim != 1:
            raise InterpretError(f"buffer {i} must be a flat numpy array, got {type(arr).__name__} "
                                 f"of shape {getattr(arr, 'shape', None)}")
        if arr.dtype != np_dtype(u.dtype):
            raise InterpretError(f"buffer {i} holds {arr.dtype}, the kernel declares {u.dtype.scalar.name} "
                                 f"(numpy {np_dtype(u.dtype)})")
        size = u.dtype.size if isinstance(u.dtype, PtrDType) and u.dtype.size >= 0 else arr.size
        if arr.size < size:
            raise InterpretError(f"buffer {i} has {arr.size} elements, the kernel declares {size}")
        return _Buf(u, arr, size)

    # --- memory

    def gate(self, u: UOp, src: list[Any]) -> _Gated:
        valid = self.array(u, src[0], "condition").astype(bool)
        inner = src[1]
        if isinstance(inner, _Gated):  # WHERE(a, WHERE(b, idx, INVALID), INVALID)
            return _Gated(valid & inner.valid, inner.idx)
        return _Gated(valid, self.array(u, inner, "index"))

    def index(self, u: UOp, src: list[Any]) -> _Ref:
        if len(src) != 2 or not isinstance(src[0], _Buf):
            raise InterpretError(f"INDEX must be INDEX(DEFINE_GLOBAL, flat_index): {short_text(u)}")
        inner = src[1]
        valid, idx = (inner.valid, inner.idx) if isinstance(inner, _Gated) else (None, self.array(u, inner, "index"))
        if idx.dtype.kind not in "iu":
            raise InterpretError(f"INDEX with a {idx.dtype} index: {short_text(u)}")
        return _Ref(u, src[0], idx.astype(np.int64, copy=False), valid)

    def check_bounds(self, u: UOp, ref: _Ref, idx: np.ndarray) -> None:
        bad = (idx < 0) | (idx >= ref.buf.limit)
        if ref.valid is not None:
            bad = bad & ref.valid
        if not bad.any():
            return
        lane = np.unravel_index(np.argmax(bad), bad.shape)
        where = ", ".join(f"{range_name(r)}={lane[i]}" for r, i in self.axis.items() if bad.shape[i] > 1)
        raise OutOfBoundsError(f"{u.op.name} out of bounds: index {np.broadcast_to(idx, bad.shape)[lane]} "
                               f"into {ref.buf.describe()} at {where or 'the only lane'}; "
                               f"index node: {short_text(ref.node)}")

    def check_dtype(self, u: UOp, dt: DType, ref: _Ref) -> None:
        if dt.scalar != ref.buf.node.dtype.scalar:
            raise InterpretError(f"{u.op.name} of {dt.scalar.name} through {ref.buf.describe()}: {short_text(u)}")

    def load(self, u: UOp, src: list[Any]) -> np.ndarray:
        ref = src[0] if len(src) == 1 else None
        if not isinstance(ref, _Ref):
            raise InterpretError(f"LOAD must be LOAD(INDEX(...)): {short_text(u)}")
        self.check_dtype(u, u.dtype, ref)
        self.check_bounds(u, ref, ref.idx)
        if ref.valid is None:
            return np.asarray(ref.buf.array[ref.idx])  # a 0-d index would give a numpy scalar
        shape = np.broadcast_shapes(ref.idx.shape, ref.valid.shape)
        self.guard(u, shape)
        valid = np.broadcast_to(ref.valid, shape)
        out = np.zeros(shape, ref.buf.array.dtype)  # masked lanes read 0
        out[valid] = ref.buf.array[np.broadcast_to(ref.idx, shape)[valid]]
        return out

    def store(self, u: UOp, src: list[Any]) -> _Write:
        ref = src[0]
        if len(src) < 2 or not isinstance(ref, _Ref):
            raise InterpretError(f"STORE must be STORE(INDEX(...), value, *ranges): {short_text(u)}")
        self.check_ranges(u, u.src[2:])
        if left_open := open_ranges(u):
            names = ", ".join(range_name(r) for r in left_open)
            raise InterpretError(f"STORE depends on {names} but neither it nor a REDUCE closes them: {short_text(u)}")
        self.check_dtype(u, u.src[1].dtype, ref)
        shape = self.shape_of(u.src[2:])
        self.guard(u, shape)
        idx = np.broadcast_to(ref.idx, shape)
        self.check_bounds(u, ref, idx)
        values = np.broadcast_to(self.array(u, src[1], "value"), shape)
        if ref.valid is not None:  # masked lanes write nothing
            keep = np.broadcast_to(ref.valid, shape)
            idx, values = idx[keep], values[keep]
        write = _Write(ref.buf.array, idx.reshape(-1), values.reshape(-1))
        self.check_races(u, ref, write)
        return write

    def check_races(self, u: UOp, ref: _Ref, w: _Write) -> None:
        # two lanes writing different values to one address: the result would depend on the backend's order
        if w.idx.size < 2 or (np.diff(w.idx) > 0).all():  # fast path: a store in increasing address order
            return
        order = np.argsort(w.idx, kind="stable")
        idx, vals = w.idx[order], w.values[order]
        dup = idx[1:] == idx[:-1]
        a, b = vals[1:][dup], vals[:-1][dup]
        differ = ~((a == b) | ((a != a) & (b != b)))  # NaN == NaN here
        if differ.any():
            at = idx[1:][dup][np.argmax(differ)]
            raise InterpretError(f"STORE writes different values to index {at} of {ref.buf.describe()} "
                                 f"from several lanes (a race): {short_text(u)}")

    # --- compute

    def reduce(self, u: UOp, src: list[Any]) -> np.ndarray:
        ranges = u.src[1:]
        self.check_ranges(u, ranges)
        if u.arg not in REDUCE:
            raise InterpretError(f"REDUCE with arg {u.arg!r}; expected Ops.ADD, Ops.MAX or Ops.MUL")
        value = self.array(u, src[0], "value")
        # broadcast over the reduced axes first: summing a value that ignores a range counts every iteration
        shape = list(value.shape)
        for r in ranges:
            shape[self.axis[r]] = self.extent[r]
        self.guard(u, tuple(shape))
        dt = np_dtype(u.dtype)
        with np.errstate(all="ignore"):
            out = REDUCE[u.arg].reduce(np.broadcast_to(_as_dtype(value, u.dtype), shape), dtype=dt, keepdims=True,
                                       axis=tuple(self.axis[r] for r in ranges),
                                       initial=reduce_identity(u.arg, u.dtype))
        return _as_dtype(out, u.dtype)

    def alu(self, u: UOp, src: list[Any]) -> np.ndarray:
        arrays = [self.array(u, s) for s in src]
        self.guard(u, np.broadcast_shapes(*(a.shape for a in arrays)))
        if u.op is Ops.CAST:
            return _as_dtype(arrays[0], u.dtype)
        if u.op is Ops.BITCAST:
            return _bitcast(arrays[0], u)
        with np.errstate(all="ignore"):
            try:
                out = ARRAY[u.op](*_operands(u, arrays))
            except (TypeError, ValueError) as e:
                raise InterpretError(f"{u.op.name} failed in numpy ({e}): {short_text(u)}") from e
        return _as_dtype(out, u.dtype)


def run_kernel(ast: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run the kernel `ast` (a SINK of STOREs) on flat numpy buffers; DEFINE_GLOBAL arg i is buffers[i].

    Output buffers are written in place. DEFINE_VAR values come from `var_vals` by name.
    Raises InterpretError (OutOfBoundsError for an unmasked out-of-bounds access) with the kernel's
    text attached as a note.
    """
    if ast.op is not Ops.SINK:
        raise InterpretError(f"a kernel is a SINK of STOREs, got {ast.op.name}")
    try:
        writes = _Kernel(ast, buffers, dict(var_vals or {})).run()
    except InterpretError as e:
        e.add_note("kernel:\n" + _safe_text(ast))
        raise
    for w in writes:  # after every load: loads see the buffers as the kernel found them
        w.buf[w.idx] = w.values


def _safe_text(ast: UOp) -> str:
    # an error note must never hide the error it annotates
    try:
        from rulec.backends.kernel_text import kernel_text  # the printer lives with the backends

        return kernel_text(ast)
    except Exception:  # noqa: BLE001
        return short_text(ast, 2000)
