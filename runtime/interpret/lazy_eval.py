"""A direct numpy evaluator of tensor-level graphs (docs/tensor-ir.md): the test oracle of the scheduler.

`evaluate(uop)` computes the value of every node once (memoized over the DAG), in topological order,
with one small numpy function per op. It is strict about the contract, so that a malformed graph fails
here rather than producing a plausible number:

* ALU sources must already have one common shape (broadcasting is explicit: RESHAPE + EXPAND);
* EXPAND keeps the rank and only grows axes of size 1;
* every result must have the shape that `UOp.shape` infers, and is stored in the node's dtype.

Semantics: the ALU ops are runtime/ir/alu.py's (IDIV and MOD truncate toward zero as in C, integer
arithmetic wraps, float division by zero gives inf/nan), computed by the array table the kernel
interpreter uses too (runtime/interpret/alu_numpy.py). PAD pads with zeros, BUFFER reads the contents kept in
`rulec.runtime.buffers`, ASSIGN evaluates to its value (the graph is not mutated).

One difference from the kernel interpreter is deliberate: bfloat16 is computed in float32 and not
rounded, as the buffer store keeps it (runtime/buffers.py), while the interpreter rounds every
bfloat16 result like a bfloat16 backend. So on bfloat16 the two agree only up to that rounding.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rulec.runtime import buffers
from rulec.runtime.interpret.alu_numpy import ARRAY, REDUCE
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.placement import layout
from rulec.runtime.ir.uop import UOp


def evaluate(uop: UOp, var_vals: dict[str, int] | None = None, wide: bool = False) -> np.ndarray:
    """The value of a tensor-level node, as a fresh numpy array of its shape and dtype."""
    return evaluate_all(uop, var_vals=var_vals, wide=wide)[0]


def evaluate_all(*uops: UOp, var_vals: dict[str, int] | None = None, wide: bool = False) -> list[np.ndarray]:
    """The values of several nodes, sharing the work on common subgraphs.

    wide=True computes every floating-point node in float64 (constants from their exact args, casts
    between float dtypes not rounding): the high-precision reference that `rulec run --check` compares
    float32 results with. Integer and bool nodes are computed exactly as without it."""
    memo: dict[UOp, Any] = {}
    var_vals = {**_bindings(uops), **(var_vals or {})}
    for root in uops:
        if root.op is Ops.SINK:
            raise ValueError("evaluate the outputs of a SINK (evaluate_all(*sink.src)), not the SINK")
    order = [n for n in UOp.sink(*uops).toposort() if n.op is not Ops.SINK] if uops else []
    deferred = _summed_products(order, set(uops))
    with np.errstate(all="ignore"):  # wrapping ints and inf/nan floats are the semantics, not errors
        for node in order:
            if node in deferred:
                a, b = memo[node.src[0]], memo[node.src[1]]
                if np.shape(a) != np.shape(b):
                    raise ValueError(f"lazy_eval: MUL sources have different shapes {[np.shape(a), np.shape(b)]}; "
                                     "broadcasting must be explicit")
                memo[node] = _Product(a, b, node)
            else:
                memo[node] = _eval_node(node, [memo[s] for s in node.src], var_vals, wide)
    return [np.array(memo[u], copy=True) for u in uops]


def _bindings(uops: tuple[UOp, ...]) -> dict[str, int]:
    """The values BIND nodes give variables, in sources and in movement-op args (symbolic shapes)."""
    out: dict[str, int] = {}
    # one walk over the sources and the UOps in args: a toposort per node would cost O(depth) each
    seen: set[UOp] = set()
    stack = list(uops)
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        if m.op is Ops.BIND:
            out[m.src[0].arg[0]] = m.src[1].arg
        stack.extend(m.src)
        stack.extend(_arg_uops(m.arg))
    return out


def _arg_uops(arg: Any) -> list[UOp]:
    if isinstance(arg, UOp):
        return [arg]
    if isinstance(arg, tuple):
        return [u for a in arg for u in _arg_uops(a)]
    return []


def _symbolic(arg: Any) -> bool:
    return bool(_arg_uops(arg))


def _resolve(arg: Any, var_vals: dict[str, int]) -> Any:
    if isinstance(arg, UOp):
        return int(evaluate(arg, var_vals))
    if isinstance(arg, tuple):
        return tuple(_resolve(a, var_vals) for a in arg)
    return arg


def _storage(dtype: Any, wide: bool) -> np.dtype:
    return np.dtype(np.float64) if wide and dtype.kind == "float" else buffers.numpy_dtype(dtype)


def _eval_node(node: UOp, srcs: list[Any], var_vals: dict[str, int], wide: bool = False) -> Any:
    if node.op in (Ops.UNIQUE, Ops.DEVICE):
        return None  # bookkeeping sources of BUFFER, not values
    if node.op is Ops.MSTACK:
        return list(srcs)  # one value per device: only a MULTI or an MSELECT reads it
    if node.op in (Ops.MULTI, Ops.MSELECT):
        return _multi_value(node, srcs[0])
    fn = _HANDLERS.get(node.op)
    if fn is None:
        raise NotImplementedError(f"lazy_eval: {node.op.name} is not a tensor-level op")
    if node.op in GroupOp.ALU and len({np.shape(s) for s in srcs}) > 1:
        raise ValueError(f"lazy_eval: {node.op.name} sources have different shapes "
                         f"{[np.shape(s) for s in srcs]}; broadcasting must be explicit")
    if node.op in GroupOp.Movement and _symbolic(node.arg):
        # symbolic sizes in a movement op's arg take the values of their variables
        node = node.replace(arg=_resolve(node.arg, var_vals))
    if wide and node.op is Ops.BITCAST and srcs[0].dtype != buffers.numpy_dtype(node.src[0].dtype):
        srcs = [srcs[0].astype(buffers.numpy_dtype(node.src[0].dtype))]  # the bits of the narrow value
    if wide and node.op is Ops.CONST and node.dtype.kind == "float":
        out = np.asarray(np.float64(node.arg))
    elif wide and node.op is Ops.CAST:
        out = np.asarray(srcs[0]).astype(_storage(node.dtype, True))
    else:
        out = np.asarray(fn(node, *srcs) if node.op not in _NEEDS_VARS else fn(node, var_vals))
    out = out.astype(_storage(node.dtype, wide), copy=False)
    shape = node.shape
    if shape is not None and not _symbolic(shape) and out.shape != tuple(shape):
        raise ValueError(f"lazy_eval: {node.op.name} computed shape {out.shape}, the graph says {node.shape}")
    return out


def _multi_value(node: UOp, x: Any) -> np.ndarray:
    """A multi-device value (MULTI: the parts side by side along the shard axis, or part 0 of a replicated
    one), or device i's part of one (MSELECT of its parts, or of the logical value: its slice)."""
    if node.op is Ops.MULTI:
        axis = node.arg[0]
        return np.asarray(x[0] if axis is None else np.concatenate(x, axis=axis))
    if isinstance(x, list):
        return np.asarray(x[node.arg])
    lay = layout(node.src[0])
    if lay is None or lay.axis is None:
        return np.asarray(x)
    return np.asarray(np.split(x, len(lay.devices), axis=lay.axis)[node.arg])


# ------------------------------------------------------------------ leaves

def _buffer(node: UOp, *_: Any) -> np.ndarray:
    return buffers.get(node)


def _define_var(node: UOp, var_vals: dict[str, int]) -> int:
    name = node.arg[0]
    if name not in var_vals:
        raise ValueError(f"lazy_eval: no value for variable {name!r}; pass var_vals")
    return var_vals[name]


# ------------------------------------------------------------------ movement

def _expand(node: UOp, x: np.ndarray) -> np.ndarray:
    new = tuple(node.arg)
    if len(new) != x.ndim or any(s != n and s != 1 for s, n in zip(x.shape, new)):
        raise ValueError(f"lazy_eval: cannot EXPAND {x.shape} to {new}")
    return np.broadcast_to(x, new)


def _shrink(node: UOp, x: np.ndarray) -> np.ndarray:
    return x[tuple(slice(b, e) for b, e in node.arg)]


def _flip(node: UOp, x: np.ndarray) -> np.ndarray:
    return x[tuple(slice(None, None, -1) if f else slice(None) for f in node.arg)]


# ------------------------------------------------------------------ casts

def _cast(node: UOp, x: np.ndarray) -> np.ndarray:
    return x.astype(buffers.numpy_dtype(node.dtype))


def _bitcast(node: UOp, x: np.ndarray) -> np.ndarray:
    return np.require(x, None, "C").view(buffers.numpy_dtype(node.dtype))  # ascontiguousarray makes 0-d 1-d


def _elementwise(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda node, *xs: fn(*xs)


# ------------------------------------------------------------------ reduce

class _Product:
    """A float MUL whose only readers sum it (a matmul, a convolution): kept as its two factors, so the sum
    is one einsum over the factors' own axes instead of a broadcast product of every pair."""

    def __init__(self, a: np.ndarray, b: np.ndarray, node: UOp):
        self.a, self.b, self.node = a, b, node


def _summed_products(order: list[UOp], roots: set[UOp]) -> set[UOp]:
    readers: dict[UOp, list[UOp]] = {}
    for n in order:
        for s in n.src:
            readers.setdefault(s, []).append(n)
    return {n for n in order if n.op is Ops.MUL and n.dtype.kind == "float" and n not in roots and readers.get(n)
            and all(r.op is Ops.REDUCE_AXIS and r.arg[0] is Ops.ADD for r in readers[n])}


def _einsum_sum(p: _Product, axes: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """sum(a * b, axes, keepdims) where a and b have one (broadcast) shape: each factor enters the einsum
    with only its real axes (stride 0 marks a broadcast one), so no product array is built."""
    shape = np.broadcast_shapes(np.shape(p.a), np.shape(p.b))
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if len(shape) > len(letters) or 0 in shape:  # (an empty product: nothing to save)
        return np.multiply(p.a, p.b).sum(axis=axes, keepdims=True, dtype=dtype)
    parts, subs = [], []
    for x in (p.a, p.b):
        x = np.broadcast_to(np.asarray(x, dtype=dtype), shape)
        real = [i for i in range(len(shape)) if x.strides[i] != 0 and shape[i] != 1]
        parts.append(x[tuple(slice(None) if i in real else 0 for i in range(len(shape)))])
        subs.append("".join(letters[i] for i in real))
    present = set("".join(subs))
    kept = [i for i in range(len(shape)) if i not in axes and letters[i] in present]
    out = np.einsum(f"{subs[0]},{subs[1]}->{''.join(letters[i] for i in kept)}", *parts, optimize=True)
    # reduced axes that neither factor has add up equal terms
    for i in axes:
        if letters[i] not in present:
            out = out * shape[i]
    full = tuple(1 if i in axes else shape[i] for i in range(len(shape)))
    squeezed = tuple(shape[i] if i in kept else 1 for i in range(len(shape)))
    return np.broadcast_to(np.asarray(out, dtype=dtype).reshape(squeezed), full)


def _reduce_axis(node: UOp, x: Any) -> np.ndarray:
    op, axes = node.arg
    if isinstance(x, _Product):
        return _einsum_sum(x, tuple(axes), np.result_type(np.asarray(x.a).dtype, np.asarray(x.b).dtype))
    return REDUCE[op].reduce(x, axis=tuple(axes), keepdims=True, dtype=x.dtype)


_HANDLERS: dict[Ops, Callable[..., Any]] = {
    Ops.BUFFER: _buffer,
    Ops.CONST: lambda node, *_: np.array(node.arg).astype(buffers.numpy_dtype(node.dtype)),  # ints out of range wrap
    Ops.IOTA: lambda node: np.arange(node.arg),
    Ops.DEFINE_VAR: _define_var,
    Ops.BIND: lambda node, var, val: val,
    # movement
    Ops.RESHAPE: lambda node, x: x.reshape(node.arg),
    Ops.EXPAND: _expand,
    Ops.PERMUTE: lambda node, x: np.transpose(x, node.arg),
    Ops.PAD: lambda node, x: np.pad(x, node.arg),
    Ops.SHRINK: _shrink,
    Ops.FLIP: _flip,
    # ALU ops: the shared array table
    **{op: _elementwise(fn) for op, fn in ARRAY.items()},
    Ops.CAST: _cast,
    Ops.BITCAST: _bitcast,
    # reduce and bookkeeping
    Ops.REDUCE_AXIS: _reduce_axis,
    Ops.CONTIGUOUS: lambda node, x: x,
    Ops.CONTIGUOUS_BACKWARD: lambda node, x: x,
    Ops.DETACH: lambda node, x: x,
    Ops.FUSE: lambda node, x: x,
    Ops.COPY: lambda node, x, *_: x,
    Ops.ASSIGN: lambda node, target, value: value,
}
_NEEDS_VARS = frozenset({Ops.DEFINE_VAR})
