"""Argument checks of the Tensor frontend: shapes, sizes, axes, paddings, shrinks and constants.

Every public `Tensor` method that takes one of these runs it through a function here, so a bad argument
raises at the call, naming the argument, instead of being truncated or misread into a wrong answer.
The rules follow numpy (docs/tensor-ir.md, "Frontend arguments"):

* sizes, axes, pads and shrink bounds are integers: Python ints or numpy integers, never bools, floats
  or strings (TypeError). A bound variable (a BIND/DEFINE_VAR UOp) is a symbolic size or bound.
* sizes of a new tensor are >= 0 (ValueError); `reshape` infers one -1, `expand` keeps an axis at -1.
* an axis out of range raises `AxisError`, both a ValueError and an IndexError (as numpy's).
* an integer constant that does not fit its dtype wraps modulo 2**bits (tinygrad's rule, `const_value`).
"""
from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.ir.shape import shrink_span, size_sum

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

__all__ = ["AxisError", "ArgFormError", "BadArgError", "DTypeArgError", "IndexDTypeError", "ModeError",
           "as_int", "int_tuple", "new_shape", "axis", "axes", "int_pair", "pad_pairs", "python_data",
           "shrink_bounds", "const_value", "arange_length", "arange_index_dtype", "check_arange_fits",
           "per_axis", "conv_pads"]


class AxisError(ValueError, IndexError):
    """An axis out of range for a shape (numpy's AxisError is also both)."""


class ArgFormError(TypeError, ValueError):
    """Arguments given in a form the call does not take (a tuple mixed with integers): a TypeError, and a
    ValueError as tinygrad raises for it."""


class BadArgError(ValueError, RuntimeError):
    """An argument value the op cannot take (an unknown mode, a repeated axis): a ValueError, and a
    RuntimeError as torch and tinygrad raise for most of these."""


class WindowShapeError(BadArgError, AssertionError):
    """Shapes a convolution or pooling cannot take (an input that does not match the weight, a window
    larger than the padded input, per-axis arguments for another number of axes): a BadArgError, and an
    AssertionError as tinygrad raises for them."""


class DTypeArgError(TypeError, RuntimeError):
    """A tensor of a dtype the op does not take (bitwise ops on floats): a TypeError, and a RuntimeError as
    torch and tinygrad raise."""


class IndexDTypeError(TypeError, IndexError):
    """An index of a dtype that cannot index (floats, bools): a TypeError, and an IndexError as tinygrad
    raises."""


class ModeError(ValueError, NotImplementedError):
    """A mode string the op does not know: a ValueError, and a NotImplementedError as tinygrad raises."""


def _describe(v: Any) -> str:
    return f"{type(v).__name__} {v!r}"


def as_int(v: Any, what: str) -> int:
    """`v` as an int; TypeError naming `what` for bools, floats, strings and anything else."""
    if not isinstance(v, (bool, np.bool_)):
        try:
            return operator.index(v)  # ints, numpy integers, 0-d integer arrays; never floats
        except TypeError:
            pass
    raise TypeError(f"{what} must be an integer, not {_describe(v)}")


def _size_or_var(v: Any, what: str, allow_none: bool) -> Any:
    if v is None and allow_none:
        return None
    if isinstance(v, UOp):
        if not _is_size_expression(v):
            raise ValueError(f"{what}: a symbolic size must be a bound variable or a sum of them and integers, "
                             f"not {v.op.name}")
        return size_sum(v)  # one form per sum: `start_pos + n` and `n + start_pos` are one size
    return as_int(v, what)


_SIZE_OPS = (Ops.BIND, Ops.DEFINE_VAR, Ops.CONST, Ops.ADD, Ops.SUB)


def _is_size_expression(v: UOp) -> bool:
    """A symbolic size rulec takes: bound variables and integers combined by + and - (`start_pos + n`)."""
    if v.op in (Ops.BIND, Ops.DEFINE_VAR):
        return True
    return v.op in _SIZE_OPS and all(_is_size_expression(s) for s in v.src)


def _is_one_value(x: Any) -> bool:
    """True for a single argument (a number, a string, None, a UOp), False for a sequence of them."""
    return x is None or isinstance(x, (UOp, str, bytes, int, float, np.generic)) or not hasattr(x, "__iter__") \
        or (isinstance(x, np.ndarray) and x.ndim == 0)


def int_tuple(first: Any, rest: tuple = (), what: str = "shape", allow_none: bool = False) -> tuple:
    """`f((2, 3))` and `f(2, 3)` both mean (2, 3), as in tinygrad: the integers (or bound variables; None
    where `allow_none`) given, type-checked. Ranges are the caller's business."""
    if _is_one_value(first):
        items = (first, *rest)
    elif rest:
        raise ArgFormError(f"give a {what} either as one tuple or as integers, not {(first, *rest)!r}")
    else:
        items = tuple(first)
    return tuple(_size_or_var(v, f"{what} {items!r}: every entry", allow_none) for v in items)


def new_shape(args: tuple, what: str = "shape") -> tuple:
    """The shape of a new tensor, from `f(2, 3)`, `f((2, 3))` or `f()`: sizes >= 0, as numpy."""
    shape = int_tuple(args[0], args[1:], what) if args else ()
    if any(isinstance(s, int) and s < 0 for s in shape):
        raise ValueError(f"negative dimensions are not allowed in {what} {shape}")
    return shape


def axis(a: Any, ndim: int, shape: tuple, what: str = "axis") -> int:
    """One axis in [-ndim, ndim), made non-negative; `shape` is only for the message."""
    i = as_int(a, what)
    if not -ndim <= i < ndim:
        raise AxisError(f"{what} {i} is out of range for shape {tuple(shape)}")
    return i % ndim if ndim else 0


def axes(arg: Any, ndim: int, shape: tuple, what: str = "axis", reduction: bool = False) -> tuple[int, ...]:
    """None (all axes), one axis, or a sequence of distinct axes; sorted. A reduction of a 0-d tensor
    also takes axis 0 (or -1), and reduces nothing: numpy's sum/max and tinygrad allow it."""
    if arg is None:
        return tuple(range(ndim))
    items = (arg,) if _is_one_value(arg) else tuple(arg)
    items = tuple(as_int(a, what) for a in items)  # every type before any range
    scalar_axes = reduction and ndim == 0
    out = tuple(axis(a, 1 if scalar_axes else ndim, shape, what) for a in items)
    if len(set(out)) != len(out):
        raise BadArgError(f"repeated axis in {what} {arg!r} for shape {tuple(shape)}")
    return () if scalar_axes else tuple(sorted(out))


def int_pair(v: Any, what: str) -> tuple[int, int]:
    """An int meaning (v, v), or a pair of ints."""
    return _pair(v, what, as_int)


def _pair(v: Any, what: str, one: Callable[[Any, str], Any]) -> tuple[Any, Any]:
    """`one(v)` twice for a single value, or `one` of each item of a pair."""
    if _is_one_value(v):
        n = one(v, what)
        return (n, n)
    items = tuple(v)
    if len(items) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v!r}")
    return (one(items[0], what), one(items[1], what))


def pad_pairs(padding: Any, ndim: int, shape: tuple) -> tuple[tuple[int, int], ...]:
    """((before, after), ...) per axis (None: no padding), or torch-style flat ints
    (last_before, last_after, second_last_before, ...) for the trailing axes."""
    bad = f"bad padding {padding!r} for shape {tuple(shape)}"
    if _is_one_value(padding):
        raise TypeError(f"{bad}: give a sequence of pairs or of ints")
    items = tuple(padding)
    if items and all(_is_one_value(p) and p is not None for p in items):
        flat = tuple(_pad_amount(p, f"padding {padding!r}: every entry") for p in items)
        if len(flat) % 2 or len(flat) // 2 > ndim:
            raise ValueError(bad)
        pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)][::-1]
        return ((0, 0),) * (ndim - len(pairs)) + tuple(pairs)
    pairs = tuple((0, 0) if p is None else _pad_pair(p, f"padding {padding!r}: every entry") for p in items)
    if len(pairs) != ndim:
        raise ValueError(bad)
    return pairs


def _pad_amount(v: Any, what: str) -> Any:
    """An int, or a symbolic amount (`maxlen - start_pos - n`) that is >= 0 for every value of its variables:
    a negative constant pad crops, and a crop whose size depends on a binding is not taken."""
    if not isinstance(v, UOp):
        return as_int(v, what)
    amount = _size_or_var(v, what, allow_none=False)
    if amount.vmin < 0:
        raise ValueError(f"{what}: the symbolic amount {v} can be negative (down to {amount.vmin}); "
                         "a symbolic pad must be >= 0 for every value of its variables")
    return amount


def _pad_pair(v: Any, what: str) -> tuple[Any, Any]:
    return _pair(v, what, _pad_amount)


def shrink_bounds(arg: Any, shape: tuple) -> tuple[tuple[Any, Any], ...]:
    """[start, end) per axis (None: all of it), 0 <= start <= end <= size, as ints or bound variables.
    A symbolic bound is checked over its whole range of values."""
    bad = f"bad shrink {arg!r} for shape {tuple(shape)}"
    if _is_one_value(arg):
        raise TypeError(f"{bad}: give one (start, end) pair or None per axis")
    pairs = [None if p is None else _start_end(p, f"shrink {arg!r}") for p in arg]
    if any(p is not None and len(p) != 2 for p in pairs):
        raise ValueError(f"{bad}: each axis takes (start, end)")
    if len(pairs) != len(shape):
        raise ValueError(bad)
    bounds = [(0, s) if p is None else p for s, p in zip(shape, pairs)]
    lo = lambda d: d.vmin if isinstance(d, UOp) else d  # noqa: E731
    hi = lambda d: d.vmax if isinstance(d, UOp) else d  # noqa: E731

    def fits(s: Any, b: Any, e: Any) -> bool:
        n = shrink_span(b, e)
        # (v, v + 1) is one element for every v; (v, v + n) is n (a size sum cancels v), >= 0 by n's bounds
        ordered = n >= 0 if isinstance(n, int) else n.vmin >= 0
        return 0 <= lo(b) and ordered and hi(e) <= hi(s)
    if any(not fits(s, b, e) for s, (b, e) in zip(shape, bounds)):
        raise ValueError(bad)
    return tuple(bounds)


def _start_end(pair: Any, what: str) -> tuple:
    """A shrink's (start, end): ints or bound variables, or a start variable and an end `variable + k`
    (a window of k elements that moves with the variable: `x[v]` is the window (v, v + 1))."""
    if not _is_one_value(pair) and len(tuple(pair)) == 2:
        b, e = tuple(pair)
        if isinstance(b, UOp) and b.op in (Ops.BIND, Ops.DEFINE_VAR) and isinstance(e, UOp) and e.op is Ops.ADD \
                and e.src[0] is b and e.src[1].op is Ops.CONST and isinstance(e.src[1].arg, int):
            return (b, e)
    return int_tuple(pair, (), what)


def const_value(value: Any, dtype: DType) -> bool | int | float:
    """The value a constant of `dtype` holds. Integers that do not fit an integer dtype wrap modulo
    2**bits (two's complement), tinygrad's rule for constants and Python data (a C cast); floats stored in
    an integer dtype are truncated toward zero first, and NaN or infinity there is a ValueError. Floats
    are kept as Python floats: rounding to the dtype (overflow to inf) happens where they are computed."""
    if dtype.kind == "bool":
        return bool(value)
    if dtype.kind in ("int", "uint"):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot convert {value} to {dtype.name}: NaN and infinity have no integer value")
        v, lo = int(value), int(dtype.min)
        return (v - lo) % (1 << (8 * dtype.itemsize)) + lo
    if dtype.kind == "float":
        try:
            return float(value)
        except OverflowError:  # an int too large for a double is infinite in any float dtype
            return math.inf if value > 0 else -math.inf
    return value


def arange_length(start: Any, stop: Any, step: Any) -> int:
    """The number of elements of arange(start, stop, step): Python numbers, a finite non-zero step."""
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if not isinstance(v, (bool, int, float)):
            raise TypeError(f"arange takes Python numbers; its {name} is {_describe(v)}")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"arange {name} must be finite, got {v}")
    if step == 0:
        raise ValueError("arange step must not be 0")
    return max(0, math.ceil((stop - start) / step))


def python_data(arr: np.ndarray, dtype: DType | None) -> np.ndarray:
    """Python data (lists) as numpy read it, made to follow the constant rule (`const_value`): into an
    integer dtype, floats truncate toward zero and ints beyond 64 bits (kept as objects by numpy) wrap;
    NaN or infinity is a ValueError. Without a dtype, ints no 64-bit dtype holds are an OverflowError
    naming the first one (numpy raises one too)."""
    if arr.dtype != object and not (dtype is not None and dtype.kind in ("int", "uint") and arr.dtype.kind == "f"):
        return arr
    flat = arr.reshape(-1).tolist()
    if dtype is None or not all(isinstance(v, (bool, int, float)) for v in flat):
        big = next((v for v in flat if isinstance(v, int) and not -2**63 <= v < 2**64), None)
        if dtype is None and big is not None:
            raise OverflowError(f"Python int {big} does not fit int64 or uint64: give an integer dtype to wrap it")
        return arr  # the caller names the data it cannot take
    return np.array([const_value(v, dtype) for v in flat], dtype=object).reshape(arr.shape)


def arange_index_dtype(n: int, dtype: DType) -> DType:
    """The dtype of an arange's IOTA (0..n-1): its own integer dtype when that holds every index, else
    int32 or int64 (a wrapped index would be a wrong answer)."""
    if dtype.kind in ("int", "uint") and n - 1 <= dtype.max:
        return dtype
    return dtypes.int32 if n - 1 <= dtypes.int32.max else dtypes.int64


def check_arange_fits(start: Any, step: Any, n: int, dtype: DType) -> None:
    """Every value of an integer arange must fit its dtype (tinygrad raises too): wrapped, it would be
    a wrong answer."""
    last = start + (n - 1) * step
    if n and dtype.kind in ("int", "uint") and not (dtype.min <= min(start, last) and max(start, last) <= dtype.max):
        raise ValueError(f"arange values from {start} to {last} do not fit {dtype.name}: give a wider dtype")


def to_dtype(dtype: DType | str | None) -> DType | None:
    """A dtype argument: a DType, its name (`"int32"`, or an alias such as `"float"`), or None."""
    if dtype is None or isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return dtypes.from_name(dtype)
    raise TypeError(f"expected a dtype or a dtype name, not {type(dtype).__name__}")


def one_hot_along(index: Tensor, n: int, dim: int) -> Tensor:
    """Bool mask: the last axis of size n (indices 0..n-1) is True where it equals `index` (unsqueezed)."""
    T = type(index)
    return index.unsqueeze(dim) == T.arange(n).reshape(tuple(n if i == dim % (index.ndim + 1) else 1
                                                             for i in range(index.ndim + 1)))


def int_index(T: type, idx: Any, what: str) -> Tensor:
    """An index argument as an integer tensor (of class T): Tensors, lists and arrays of ints."""
    if not isinstance(idx, T):
        arr = np.asarray(idx)
        if arr.size == 0:
            arr = arr.astype(np.int32)
        if arr.dtype.kind not in "iu":
            raise IndexDTypeError(f"{what} must hold integers, got {arr.dtype} of shape {arr.shape}")
        fits = arr.dtype.itemsize <= 4 or (arr.size and abs(arr).max() < 2 ** 31)
        idx = T(arr.astype(np.int32) if fits else arr)
    if idx.dtype.kind == "index":  # a bound variable as a tensor (`Tensor(v.bind(3))`): its int32 value
        idx = idx.cast(dtypes.int32)
    if idx.dtype.kind not in ("int", "uint"):
        mask = "; bool masks are not supported (their result shape depends on the data)" \
            if idx.dtype.kind == "bool" else ""
        raise IndexDTypeError(f"{what} must be an integer tensor, not {idx.dtype.name} of shape {idx.shape}{mask}")
    return idx


def pool_pads(padding: Any, nd: int, what: str) -> list[tuple[int, int]]:
    """Pooling padding: an int, one per axis, or torch-style (left, right, top, bottom), per spatial axis."""
    if isinstance(padding, int) and not isinstance(padding, bool):
        pads = [(padding, padding)] * nd
    else:
        p = int_tuple(padding, (), f"{what} padding")
        if len(p) == nd:
            pads = [(x, x) for x in p]
        elif len(p) == 2 * nd:  # torch order: last axis first
            pads = [(p[2 * i], p[2 * i + 1]) for i in reversed(range(nd))]
        else:
            raise ValueError(f"{what} padding must be an int, {nd} ints or {2 * nd} ints, got {padding}")
    if any(a < 0 or b < 0 for a, b in pads):
        raise ValueError(f"{what} padding must be >= 0, got {padding}")
    return pads


def tuple_of(v: Any, nd: int, what: str) -> tuple[int, ...]:
    t = (v,) * nd if isinstance(v, int) and not isinstance(v, bool) else int_tuple(v, (), what)
    if len(t) != nd or min(t) < 1:
        raise ValueError(f"{what} must be {nd} ints >= 1, got {v}")
    return t


def per_axis(v: Any, nd: int, name: str) -> tuple[int, ...]:
    """An int for every spatial axis, or one int per axis."""
    if _is_one_value(v):
        return (as_int(v, name),) * nd
    items = tuple(as_int(i, name) for i in v)
    if len(items) != nd:
        raise WindowShapeError(f"conv {name} must be an int or {nd} ints, got {v!r}")
    return items


def conv_pads(padding: Any, nd: int) -> tuple[tuple[int, int], ...]:
    """Convolution padding per spatial axis: an int, one int per axis (both sides), or torch-style
    (before, after) pairs listed from the last axis back."""
    if not _is_one_value(padding) and len(padding) == 2 * nd:
        flat = [as_int(p, "padding") for p in padding]
        return tuple((flat[2 * i], flat[2 * i + 1]) for i in reversed(range(nd)))
    return tuple((p, p) for p in per_axis(padding, nd, "padding"))
