"""The functions rule expressions may call, by name.

This registry is the whole vocabulary of guards and computed args beyond
operators and attribute access: the rule compiler rejects any other call.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from .bounds import c_div, c_mod
from .dtype import DType, dtypes
from .ops import Ops
from .shape import prod
from .uop import UOp


def argsort(xs: Any) -> tuple[int, ...]:
    return tuple(sorted(range(len(xs)), key=lambda i: xs[i]))


def const_like(node: UOp, value: Any) -> UOp:
    """A CONST with the dtype of `node`."""
    return node.const_like(value)


def const(dtype: DType, value: Any) -> UOp:
    return UOp.const(dtype, value)


def identity_element(op: Ops, dtype: DType) -> Any:
    """The value `x` with `op(x, y) == y` for every y."""
    if op is Ops.ADD:
        return 0
    if op is Ops.MUL:
        return 1
    if op is Ops.MAX:
        return dtype.min
    raise ValueError(f"{op} has no identity element")


def fits_int64(*vals: Any) -> bool:
    """True when every value is an int that fits in a signed 64-bit integer."""
    return all(isinstance(v, int) and -(2**63) <= v < 2**63 for v in vals)


def fits_dtype(dtype: DType, *vals: Any) -> bool:
    """True when every value is representable in the integer or bool dtype `dtype`.

    A folded constant that does not fit would silently change meaning (signed overflow
    is undefined in C, unsigned arithmetic wraps), so folds leave such nodes alone.
    """
    dt = dtype.scalar
    if dt.kind == "bool":
        return all(isinstance(v, bool) for v in vals)
    if dt.kind not in ("int", "uint", "index"):
        return False
    return all(isinstance(v, int) and not isinstance(v, bool) and dt.min <= v <= dt.max for v in vals)


def ceil_div(a: int, b: int) -> int:
    """The smallest integer >= a / b, exactly (b != 0)."""
    return -((-a) // b)


def is_const(node: UOp) -> bool:
    return node.op is Ops.CONST


def is_int(node: UOp) -> bool:
    return node.dtype.scalar.is_int


def all_same(xs: Any) -> bool:
    return all(x is xs[0] or x == xs[0] for x in xs)


HELPERS: dict[str, Callable[..., Any]] = {
    # Python builtins that cannot escape the expression language
    "len": len, "min": min, "max": max, "abs": abs, "all": all, "any": any, "sum": sum,
    "int": int, "float": float, "bool": bool, "tuple": tuple, "range": range, "sorted": sorted,
    "zip": zip, "enumerate": enumerate, "isinstance_int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    # arithmetic with the IR's semantics
    "c_div": c_div, "c_mod": c_mod, "gcd": math.gcd, "prod": prod, "argsort": argsort,
    "fits_int64": fits_int64, "fits_dtype": fits_dtype, "ceil_div": ceil_div,
    # nodes
    "const_like": const_like, "const": const, "identity_element": identity_element,
    "is_const": is_const, "is_int": is_int, "all_same": all_same,
}

# Names an expression may use as namespaces: `Ops.ADD`, `dtypes.float32`.
NAMESPACES: dict[str, Any] = {"Ops": Ops, "dtypes": dtypes}

# Attributes an expression may read on any value (UOps, dtypes, ops, tuples).
ATTRIBUTES: frozenset[str] = frozenset({
    "op", "dtype", "src", "arg", "tag", "shape", "size", "ndim", "vmin", "vmax", "base", "ranges",
    "itemsize", "kind", "is_int", "is_float", "is_unsigned", "scalar", "addrspace", "name",
})

# the scheduler's rule files add their own pure helpers (runtime/schedule_helpers.py)
from .schedule_helpers import SCHEDULE_HELPERS  # noqa: E402

HELPERS.update(SCHEDULE_HELPERS)
