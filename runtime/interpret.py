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
computes each op in float and rounds back. IDIV and MOD truncate toward zero (C); integer
division by zero gives 0 instead of trapping (a masked lane may legally compute it). MAX propagates NaN.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Generator

import numpy as np

from .dtype import DType, PtrDType, dtypes
from .ops import GroupOp, Ops
from .shape import open_ranges, prod
from .uop import UOp, pretty
from .walk import run_recursive

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
    from .buffers import numpy_dtype

    try:
        return numpy_dtype(dt.scalar)
    except ValueError as e:
        raise InterpretError(str(e)) from None


def _round_bf16(x: np.ndarray) -> np.ndarray:
    # keep the top 16 bits of the float32, rounding to nearest even; NaN stays NaN
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000))
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def _as_dtype(x: Any, dt: DType) -> np.ndarray:
    """`x` as an array holding values of `dt` (wrapping or truncating like C casts)."""
    with np.errstate(all="ignore"):
        out = np.asarray(x).astype(np_dtype(dt), copy=False)
    return _round_bf16(out) if dt.scalar.name == "bfloat16" else out


# ----------------------------------------------------------------------------- ALU


def _c_idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    q = np.floor_divide(a, b)
    # numpy floors, C truncates: bump the quotient of an inexact division with operands of opposite sign
    return q + ((np.fmod(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)


def _neg(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.negative(x)


_ALU: dict[Ops, Callable[..., Any]] = {
    Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.true_divide,
    Ops.IDIV: _c_idiv, Ops.MOD: np.fmod,  # np.fmod is C's remainder: the sign of the dividend
    Ops.MAX: np.maximum, Ops.POW: np.power, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal,
    Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor,
    Ops.SHL: np.left_shift, Ops.SHR: np.right_shift,
    Ops.NEG: _neg, Ops.RECIP: np.reciprocal, Ops.SQRT: np.sqrt, Ops.EXP2: np.exp2, Ops.LOG2: np.log2,
    Ops.SIN: np.sin, Ops.TRUNC: np.trunc,
    Ops.WHERE: np.where, Ops.MULACC: lambda a, b, c: a * b + c,
}

_REDUCE: dict[Ops, np.ufunc] = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}


def _identity(op: Ops, dt: np.dtype) -> Any:
    if op is Ops.ADD:
        return dt.type(0)
    if op is Ops.MUL:
        return dt.type(1)
    if dt.kind == "b":
        return False
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


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
        raise InterpretError(f"unsupported BITCAST {src_dt.name} -> {dst_dt.name}: {_short(u)}")
    return np.ascontiguousarray(x, np_dtype(src_dt)).view(np_dtype(dst_dt))


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


def _short(u: UOp, limit: int = 300) -> str:
    text = " ".join(pretty(u).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _range_name(r: UOp) -> str:
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
        raise InterpretError(f"the interpreter does not run {op.name} nodes: {_short(u)}")

    # --- helpers

    def array(self, u: UOp, v: Any, what: str = "operand") -> np.ndarray:
        if isinstance(v, np.ndarray):
            return v
        kind = "INVALID" if v is _INVALID or isinstance(v, _Gated) else "a pointer or statement"
        raise InterpretError(f"{u.op.name} got {kind} as its {what}; INVALID may only appear as "
                             f"WHERE(valid, idx, INVALID) directly under an INDEX: {_short(u)}")

    def guard(self, u: UOp, shape: tuple[int, ...]) -> None:
        n = prod(shape)
        if n > MAX_ELEMENTS:
            dims = ", ".join(f"{_range_name(r)}={shape[i]}" for r, i in self.axis.items() if shape[i] > 1)
            raise InterpretError(f"{u.op.name} needs an array of {n} elements ({dims}), more than the "
                                 f"interpreter's limit of {MAX_ELEMENTS}: {_short(u)}")

    def shape_of(self, ranges: tuple[UOp, ...]) -> tuple[int, ...]:
        shape = [1] * len(self.axis)
        for r in ranges:
            shape[self.axis[r]] = self.extent[r]
        return tuple(shape)

    def check_ranges(self, u: UOp, ranges: tuple[UOp, ...]) -> None:
        for r in ranges:
            if r.op is not Ops.RANGE:
                raise InterpretError(f"{u.op.name} closes a {r.op.name}, not a RANGE: {_short(u)}")

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
            raise InterpretError(f"the extent of {_range_name(u)} depends on another range: {_short(u)}")
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
            raise InterpretError(f"INDEX must be INDEX(DEFINE_GLOBAL, flat_index): {_short(u)}")
        inner = src[1]
        valid, idx = (inner.valid, inner.idx) if isinstance(inner, _Gated) else (None, self.array(u, inner, "index"))
        if idx.dtype.kind not in "iu":
            raise InterpretError(f"INDEX with a {idx.dtype} index: {_short(u)}")
        return _Ref(u, src[0], idx.astype(np.int64, copy=False), valid)

    def check_bounds(self, u: UOp, ref: _Ref, idx: np.ndarray) -> None:
        bad = (idx < 0) | (idx >= ref.buf.limit)
        if ref.valid is not None:
            bad = bad & ref.valid
        if not bad.any():
            return
        lane = np.unravel_index(np.argmax(bad), bad.shape)
        where = ", ".join(f"{_range_name(r)}={lane[i]}" for r, i in self.axis.items() if bad.shape[i] > 1)
        raise OutOfBoundsError(f"{u.op.name} out of bounds: index {np.broadcast_to(idx, bad.shape)[lane]} "
                               f"into {ref.buf.describe()} at {where or 'the only lane'}; "
                               f"index node: {_short(ref.node)}")

    def check_dtype(self, u: UOp, dt: DType, ref: _Ref) -> None:
        if dt.scalar != ref.buf.node.dtype.scalar:
            raise InterpretError(f"{u.op.name} of {dt.scalar.name} through {ref.buf.describe()}: {_short(u)}")

    def load(self, u: UOp, src: list[Any]) -> np.ndarray:
        ref = src[0] if len(src) == 1 else None
        if not isinstance(ref, _Ref):
            raise InterpretError(f"LOAD must be LOAD(INDEX(...)): {_short(u)}")
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
            raise InterpretError(f"STORE must be STORE(INDEX(...), value, *ranges): {_short(u)}")
        self.check_ranges(u, u.src[2:])
        if left_open := open_ranges(u):
            names = ", ".join(_range_name(r) for r in left_open)
            raise InterpretError(f"STORE depends on {names} but neither it nor a REDUCE closes them: {_short(u)}")
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
                                 f"from several lanes (a race): {_short(u)}")

    # --- compute

    def reduce(self, u: UOp, src: list[Any]) -> np.ndarray:
        ranges = u.src[1:]
        self.check_ranges(u, ranges)
        if u.arg not in _REDUCE:
            raise InterpretError(f"REDUCE with arg {u.arg!r}; expected Ops.ADD, Ops.MAX or Ops.MUL")
        value = self.array(u, src[0], "value")
        # broadcast over the reduced axes first: summing a value that ignores a range counts every iteration
        shape = list(value.shape)
        for r in ranges:
            shape[self.axis[r]] = self.extent[r]
        self.guard(u, tuple(shape))
        dt = np_dtype(u.dtype)
        with np.errstate(all="ignore"):
            out = _REDUCE[u.arg].reduce(np.broadcast_to(_as_dtype(value, u.dtype), shape), dtype=dt, keepdims=True,
                                        axis=tuple(self.axis[r] for r in ranges), initial=_identity(u.arg, dt))
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
                out = _ALU[u.op](*_operands(u, arrays))
            except (TypeError, ValueError) as e:
                raise InterpretError(f"{u.op.name} failed in numpy ({e}): {_short(u)}") from e
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


# ----------------------------------------------------------------------------- kernel_text

_INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.IDIV: "/", Ops.MOD: "%",
          Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^",
          Ops.SHL: "<<", Ops.SHR: ">>"}
_CALL = {Ops.MAX: "max", Ops.POW: "pow", Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin",
         Ops.TRUNC: "trunc", Ops.MULACC: "mulacc"}


def _strip(s: str) -> str:
    """`s` without one pair of parentheses around the whole of it."""
    if not (s.startswith("(") and s.endswith(")")):
        return s
    depth = 0
    for i, ch in enumerate(s):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(s) - 1:
            return s
    return s[1:-1]


def _const_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")
    return repr(v)


class _Text:
    """Renders a kernel as C-like pseudo-code: loop nests, accumulators for REDUCEs, temporaries."""

    def __init__(self, ast: UOp):
        self.lines: list[str] = []
        self.names: dict[UOp, str] = {}  # accumulators and temporaries visible in the current scope
        self.count = 0
        self.uses = Counter(s for u in ast.toposort() for s in u.src)
        self.open: list[UOp] = []  # the ranges of the loops open where the next line goes

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count - 1}"

    def loops(self, ranges: tuple[UOp, ...], depth: int, body: Callable[[int], None],
              roots: tuple[UOp, ...] = ()) -> None:
        """Open `ranges` one loop at a time; before each loop, emit the accumulators of the REDUCEs under
        `roots` that depend on no range still to open: a reduce runs once per iteration of the innermost
        loop it reads, not inside loops it only broadcasts along."""
        saved = dict(self.names)  # names made inside the loops are not visible after them
        self.hoist(roots, depth)
        if ranges:
            r, name = ranges[0], _range_name(ranges[0])
            self.emit(depth, f"for (int {name} = 0; {name} < {_strip(self.expr(r.src[0], depth))}; {name}++) {{")
            self.open.append(r)
            self.loops(ranges[1:], depth + 1, body, roots)
            self.open.pop()
            self.emit(depth, "}")
        else:
            body(depth)
        self.names = saved

    def hoist(self, roots: tuple[UOp, ...], depth: int) -> None:
        for root in roots:
            for u in root.toposort(gate=lambda n: n.op is not Ops.REDUCE):
                if u.op is Ops.REDUCE and u not in self.names and _free_ranges(u) <= set(self.open):
                    self.reduce(u, depth)

    def prepare(self, roots: tuple[UOp, ...], depth: int) -> None:
        """Emit the accumulators of the REDUCEs `roots` use (not those nested inside other REDUCEs)."""
        for root in roots:
            for u in root.toposort(gate=lambda n: n.op is not Ops.REDUCE):
                if u.op is Ops.REDUCE and u not in self.names:
                    self.reduce(u, depth)

    def reduce(self, u: UOp, depth: int) -> None:
        acc, op = self.fresh("acc"), u.arg
        identity = _identity(op, np_dtype(u.dtype)) if op in _REDUCE else None
        init = _const_text(identity.item() if isinstance(identity, np.generic) else identity)
        self.emit(depth, f"{u.dtype.scalar.name} {acc} = {init};")

        def body(d: int) -> None:
            self.prepare((u.src[0],), d)
            v = _strip(self.expr(u.src[0], d))
            line = {Ops.ADD: f"{acc} += {v};", Ops.MUL: f"{acc} *= {v};"}.get(op, f"{acc} = max({acc}, {v});")
            self.emit(d, line)

        self.loops(u.src[1:], depth, body, (u.src[0],))
        self.names[u] = acc

    def ref(self, index: UOp, depth: int) -> tuple[str | None, str]:
        """(mask or None, `bufN[idx]`) of an INDEX."""
        steps = self._ref(index)
        text = None
        try:
            while True:
                text = self.expr(steps.send(text), depth)
        except StopIteration as done:
            return done.value

    def _ref(self, index: UOp) -> Generator[UOp, str, tuple[str | None, str]]:
        # `yield u` asks for the text of u (see expr)
        g, idx = index.src[0], index.src[-1]
        gate = None
        while idx.op is Ops.WHERE and idx.src[2].op is Ops.INVALID:
            cond = _strip((yield idx.src[0]))
            gate = cond if gate is None else f"({gate}) && ({cond})"
            idx = idx.src[1]
        return gate, f"buf{g.arg}[{_strip((yield idx))}]"

    def expr(self, u: UOp, depth: int) -> str:
        # a node's text is final once made (temporaries are named on first use), so each is made once
        return run_recursive(lambda n: self._expr(n, depth), u, memo=dict(self.names))

    def _expr(self, u: UOp, depth: int) -> Generator[UOp, str, str]:
        if u in self.names:
            return self.names[u]
        text = yield from self._render(u)
        if self.uses[u] > 1 and len(text) > 24 and u.op is not Ops.REDUCE:
            name = self.fresh("t")
            self.emit(depth, f"{u.dtype.scalar.name} {name} = {_strip(text)};")
            self.names[u] = name
            return name
        return text

    def _render(self, u: UOp) -> Generator[UOp, str, str]:
        # `yield src` asks for the text of a source, in the order the text reads (temporaries come out in
        # that order); a LOAD renders its INDEX itself
        op = u.op

        def args() -> Generator[UOp, str, str]:
            parts = []
            for x in u.src:
                parts.append(_strip((yield x)))
            return ", ".join(parts)

        if op is Ops.CONST:
            return _const_text(u.arg)
        if op is Ops.DEFINE_VAR:
            return str(u.arg[0])
        if op is Ops.RANGE:
            return _range_name(u)
        if op is Ops.LOAD and u.src and u.src[0].op is Ops.INDEX:
            gate, text = yield from self._ref(u.src[0])
            return text if gate is None else f"({gate} ? {text} : 0)"
        if op in _INFIX and len(u.src) == 2:
            a = yield u.src[0]
            return f"({a} {_INFIX[op]} {(yield u.src[1])})"
        if op in _CALL:
            return f"{_CALL[op]}({(yield from args())})"
        if op is Ops.NEG:
            return f"(-{(yield u.src[0])})"
        if op is Ops.RECIP:
            return f"(1 / {(yield u.src[0])})"
        if op is Ops.CAST:
            return f"(({u.dtype.scalar.name}){(yield u.src[0])})"
        if op is Ops.BITCAST:
            return f"bitcast<{u.dtype.scalar.name}>({_strip((yield u.src[0]))})"
        if op is Ops.WHERE and len(u.src) == 3:
            a = yield u.src[0]
            b = yield u.src[1]
            return f"({a} ? {b} : {(yield u.src[2])})"
        return f"{op.name}({(yield from args())})"

    def store(self, st: UOp, depth: int) -> None:
        self.prepare(st.src[:2], depth)
        if st.src[0].op is Ops.INDEX:
            gate, target = self.ref(st.src[0], depth)
        else:
            gate, target = None, f"*{self.expr(st.src[0], depth)}"
        line = f"{target} = {_strip(self.expr(st.src[1], depth))};"
        self.emit(depth, line if gate is None else f"if ({gate}) {line}")


def _free_ranges(u: UOp) -> set[UOp]:
    """The ranges `u` reads that no REDUCE inside it closes."""
    topo = u.toposort()
    closed = {r for x in topo if x.op is Ops.REDUCE for r in x.src[1:]}
    return {x for x in topo if x.op is Ops.RANGE} - closed


def kernel_text(ast: UOp) -> str:
    """A readable, C-like rendering of a kernel AST (loops over ranges, loads, stores, reduces)."""
    topo = ast.toposort()
    bufs = sorted((u for u in topo if u.op is Ops.DEFINE_GLOBAL), key=lambda g: g.arg if isinstance(g.arg, int) else -1)
    params = [f"{g.dtype.scalar.name} buf{g.arg}[{g.dtype.size if isinstance(g.dtype, PtrDType) else '?'}]"
              for g in bufs]
    params += [f"int {v.arg[0]} /* {v.arg[1]}..{v.arg[2]} */" for v in topo if v.op is Ops.DEFINE_VAR]
    t = _Text(ast)
    t.emit(0, f"kernel({', '.join(params)}) {{")
    for st in ast.src if ast.op is Ops.SINK else (ast,):
        if st.op is Ops.STORE:
            t.loops(st.src[2:], 1, lambda d, st=st: t.store(st, d), st.src[:2])
        else:
            t.emit(1, f"{_short(st)};")
    t.emit(0, "}")
    return "\n".join(t.lines)


def _safe_text(ast: UOp) -> str:
    # an error note must never hide the error it annotates
    try:
        return kernel_text(ast)
    except Exception:  # noqa: BLE001
        return _short(ast, 2000)
