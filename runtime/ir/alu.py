"""What every ALU op means, once: the table `ALU` and `alu_eval(op, dtype, *operands)` on Python scalars.

This is the specification the numpy oracles (runtime/interpret/interpret.py, runtime/interpret/lazy_eval.py, through
runtime/interpret/alu_numpy.py) implement on arrays; tests/test_alu.py checks them against it value by value.
It imports no numpy, so constant folding can evaluate ops at rewrite time cheaply.

Semantics (C's, where C defines them; the reference interpreter's where C leaves them undefined):

* an op computes in its node's dtype: operands are converted to it first, the result is rounded to it.
  Comparisons are the exception: they compare their operands as given and give a bool;
* integers wrap (two's complement; `index` is int64). IDIV and MOD truncate toward zero, so MOD has the
  sign of the dividend. Integer division by zero gives 0, and so does RECIP of an integer 0;
* shifts by a negative amount or by the width or more give 0 (SHR of a negative value: -1);
* floats are IEEE: each op is correctly rounded to the dtype (float16, float32, float64; bfloat16 rounds
  through float32, as a bfloat16 backend computing in float does), division by zero gives inf or NaN,
  MAX propagates NaN, domain errors give NaN (SQRT, LOG2 of negatives, SIN of inf);
* bool is C's bool: ADD is OR, MUL is AND, NEG is NOT.

With `strict=True`, alu_eval raises AluUndefined where C's behaviour is undefined (signed overflow,
division by zero, a shift out of range or of a negative value left, and an operand its dtype cannot
hold), so a constant folder can decline. Unsigned arithmetic wraps in C, so strict wraps it too.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

from rulec.runtime.ir.dtype import DType
from rulec.runtime.ir.ops import GroupOp, Ops

Scalar = bool | int | float


class AluUndefined(ArithmeticError):
    """The operation is undefined behaviour in C (raised by alu_eval with strict=True only)."""


# ----------------------------------------------------------------------------- dtype conversion

_INTS = frozenset({"int", "uint", "index"})
_ALL = frozenset({"bool", "int", "uint", "index", "float"})
_NUMBERS = _ALL - {"bool"}
_BITS = _INTS | {"bool"}
_FLOATS = frozenset({"float"})


def _width(dt: DType) -> int:
    return 64 if dt.kind == "index" else 8 * dt.itemsize


def wrap(dt: DType, v: int) -> int:
    """`v` reduced to the integer dtype `dt` (two's complement for signed dtypes)."""
    bits = _width(dt)
    if dt.kind == "uint":
        return v & ((1 << bits) - 1)
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half


def _pack(fmt: str, x: float) -> float:
    try:
        return struct.unpack(fmt, struct.pack(fmt, x))[0]
    except OverflowError:  # past the largest finite value (after rounding)
        return math.copysign(math.inf, x)


def _to_bf16(x: float) -> float:
    # round the float32 to its top 16 bits, to nearest even; NaN stays NaN
    if math.isnan(x):
        return x
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def round_float(dt: DType, x: float) -> float:
    """`x` rounded to the float dtype `dt` (to nearest even; too large gives inf)."""
    name = dt.scalar.name
    if name == "float64":
        return x
    if name == "float16":
        return _pack("<e", x)
    f32 = _pack("<f", x)
    return _to_bf16(f32) if name == "bfloat16" else f32


def _step(dt: DType, x: float) -> float:
    # an intermediate result (MULACC's product, float IDIV's quotient): bfloat16 computes in float32, as a
    # bfloat16 backend and the interpreter do, and only the op's result is rounded to bfloat16
    return _pack("<f", x) if dt.name == "bfloat16" else round_float(dt, x)


def as_dtype(dt: DType, v: Scalar, strict: bool = False) -> Scalar:
    """The Python value `v` converted to dtype `dt` as a C cast does (floats to ints truncate)."""
    kind = dt.scalar.kind
    if kind == "bool":
        return bool(v)
    if kind in _INTS:
        if isinstance(v, float):
            if not math.isfinite(v):  # undefined in C; numpy's answer depends on the machine
                raise (AluUndefined if strict else ValueError)(f"{v} has no {dt.scalar.name} value")
            v = math.trunc(v)
        out = wrap(dt.scalar, int(v))
        if strict and out != v:
            raise AluUndefined(f"{v} does not fit {dt.scalar.name}")
        return out
    if kind == "float":
        try:
            return round_float(dt.scalar, float(v))
        except OverflowError:  # an int too large for a double
            return math.copysign(math.inf, v)
    raise TypeError(f"no ALU value of dtype {dt.scalar.name}")


# ----------------------------------------------------------------------------- one function per op
# Each takes (dtype, strict, *operands already in dtype) and returns the result in dtype.


def _int_result(dt: DType, strict: bool, v: int) -> int:
    out = wrap(dt, v)
    if strict and out != v and dt.kind != "uint":  # unsigned arithmetic wraps in C; signed overflow is UB
        raise AluUndefined(f"{v} overflows {dt.name}")
    return out


def _result(dt: DType, strict: bool, exact: Any) -> Scalar:
    """`exact` (an int or a double) as a value of `dt`."""
    if dt.kind == "bool":
        return bool(exact)
    if dt.kind in _INTS:
        return _int_result(dt, strict, exact)
    return round_float(dt, exact)


def _fdiv(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _c_div(dt: DType, strict: bool, a: int, b: int) -> int:
    if b == 0:
        if strict:
            raise AluUndefined("integer division by zero")
        return 0
    q = abs(a) // abs(b)
    return _int_result(dt, strict, -q if (a < 0) != (b < 0) else q)


def _idiv(dt: DType, s: bool, a: Any, b: Any) -> Scalar:
    if dt.kind in _INTS:
        return _c_div(dt, s, a, b)
    q = _step(dt, _fdiv(a, b))  # the quotient is rounded before it is truncated
    return round_float(dt, q if not math.isfinite(q) else math.copysign(float(math.trunc(q)), q))


def _mod(dt: DType, s: bool, a: Any, b: Any) -> Scalar:
    if dt.kind in _INTS:
        if b == 0:
            if s:
                raise AluUndefined("integer modulo by zero")
            return 0
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.fmod(a, b)  # exact: no rounding


def _max(dt: DType, s: bool, a: Any, b: Any) -> Scalar:
    if dt.kind == "float" and (math.isnan(a) or math.isnan(b)):
        return math.nan
    return max(a, b)


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.trunc(y) and math.trunc(y) % 2 == 1


def _float_pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and _odd_integer(y) else math.inf
    except ValueError:  # a pole (0 to a negative power) or a domain error (negative to a fraction)
        if x == 0:
            return math.copysign(math.inf, x) if _odd_integer(y) else math.inf
        return math.nan


def _pow(dt: DType, s: bool, a: Any, b: Any) -> Scalar:
    if dt.kind == "float":
        return round_float(dt, _float_pow(a, b))
    if b < 0:
        raise ValueError("an integer to a negative integer power")
    if not s or dt.kind == "uint":  # wrapping: the power modulo 2**width, without building a**b
        return wrap(dt, pow(a, b, 1 << _width(dt)))
    if abs(a) > 1 and b >= _width(dt):  # |a**b| >= 2**width: surely out of range, so don't build it
        raise AluUndefined(f"{a} ** {b} overflows {dt.name}")
    return _int_result(dt, s, a**b)


def _shl(dt: DType, s: bool, a: int, b: int) -> int:
    bits = _width(dt)
    if not 0 <= b < bits:
        if s:
            raise AluUndefined(f"shift by {b} of a {bits}-bit value")
        return 0
    if s and a < 0:
        raise AluUndefined("left shift of a negative value")
    return _int_result(dt, s, a << b)


def _shr(dt: DType, s: bool, a: int, b: int) -> int:
    bits = _width(dt)
    if not 0 <= b < bits:
        if s:
            raise AluUndefined(f"shift by {b} of a {bits}-bit value")
        return -1 if a < 0 else 0
    return a >> b  # arithmetic on signed values, as every C compiler rulec targets does


def _neg(dt: DType, s: bool, a: Any) -> Scalar:
    if dt.kind == "bool":
        return not a
    return _result(dt, s, -a)


def _recip(dt: DType, s: bool, a: Any) -> Scalar:
    if dt.kind in _INTS:
        return _c_div(dt, s, 1, a)
    return round_float(dt, math.copysign(math.inf, a) if a == 0 else 1.0 / a)


def _sqrt(dt: DType, s: bool, a: float) -> float:
    return math.nan if a < 0 else round_float(dt, math.sqrt(a))


def _exp2(dt: DType, s: bool, a: float) -> float:
    try:
        return round_float(dt, 2.0**a)
    except OverflowError:
        return math.inf


def _log2(dt: DType, s: bool, a: float) -> float:
    if math.isnan(a) or a < 0:
        return math.nan
    return -math.inf if a == 0 else round_float(dt, math.log2(a))


def _sin(dt: DType, s: bool, a: float) -> float:
    return math.nan if math.isinf(a) else round_float(dt, math.sin(a))


def _trunc(dt: DType, s: bool, a: Any) -> Scalar:
    if dt.kind in _INTS or not math.isfinite(a):
        return a
    return math.copysign(float(math.trunc(a)), a)


def _mulacc(dt: DType, s: bool, a: Any, b: Any, c: Any) -> Scalar:
    if dt.kind in _INTS:
        return _int_result(dt, s, _int_result(dt, s, a * b) + c)
    return round_float(dt, _step(dt, _step(dt, a * b) + c))  # two roundings: a multiply, then an add


def _binary(fn: Callable[[Any, Any], Any]) -> Callable[..., Scalar]:
    return lambda dt, s, a, b: _result(dt, s, fn(a, b))


@dataclass(frozen=True)
class AluOp:
    """One ALU op: how many operands, the dtype kinds it computes in, its meaning on scalars."""
    arity: int
    kinds: frozenset[str]
    scalar: Callable[..., Scalar]  # (dtype, strict, *operands in dtype) -> result in dtype


ALU: dict[Ops, AluOp] = {
    Ops.ADD: AluOp(2, _ALL, _binary(lambda a, b: a + b)),
    Ops.SUB: AluOp(2, _NUMBERS, _binary(lambda a, b: a - b)),
    Ops.MUL: AluOp(2, _ALL, _binary(lambda a, b: a * b)),
    Ops.FDIV: AluOp(2, _FLOATS, _binary(_fdiv)),
    Ops.IDIV: AluOp(2, _NUMBERS, _idiv),
    Ops.MOD: AluOp(2, _NUMBERS, _mod),
    Ops.MAX: AluOp(2, _ALL, _max),
    Ops.POW: AluOp(2, _NUMBERS, _pow),
    Ops.CMPLT: AluOp(2, _ALL, lambda dt, s, a, b: a < b),
    Ops.CMPNE: AluOp(2, _ALL, lambda dt, s, a, b: a != b),
    Ops.CMPEQ: AluOp(2, _ALL, lambda dt, s, a, b: a == b),
    Ops.AND: AluOp(2, _BITS, _binary(lambda a, b: a & b)),
    Ops.OR: AluOp(2, _BITS, _binary(lambda a, b: a | b)),
    Ops.XOR: AluOp(2, _BITS, _binary(lambda a, b: a ^ b)),
    Ops.SHL: AluOp(2, _INTS, _shl),
    Ops.SHR: AluOp(2, _INTS, _shr),
    Ops.NEG: AluOp(1, _ALL, _neg),
    Ops.RECIP: AluOp(1, _NUMBERS, _recip),
    Ops.SQRT: AluOp(1, _FLOATS, _sqrt),
    Ops.EXP2: AluOp(1, _FLOATS, _exp2),
    Ops.LOG2: AluOp(1, _FLOATS, _log2),
    Ops.SIN: AluOp(1, _FLOATS, _sin),
    Ops.TRUNC: AluOp(1, _NUMBERS, _trunc),
    Ops.WHERE: AluOp(3, _ALL, lambda dt, s, c, a, b: a if c else b),
    Ops.MULACC: AluOp(3, _NUMBERS, _mulacc),
}

if set(ALU) != set(GroupOp.ALU):  # rules/ops.yaml and this table must name the same ops
    raise ImportError(f"runtime/ir/alu.py: ALU ops without semantics {sorted(o.name for o in set(GroupOp.ALU) - set(ALU))}"
                      f", semantics of non-ALU ops {sorted(o.name for o in set(ALU) - set(GroupOp.ALU))}")


def alu_eval(op: Ops | str, dtype: DType, *operands: Scalar, strict: bool = False) -> Scalar:
    """The value of `op` on Python scalars, as a node of dtype `dtype` computes it.

    `dtype` is the node's dtype: bool for a comparison, whose operands are compared as given; for every
    other op the operands are first converted to `dtype` (WHERE's condition to bool). Raises TypeError
    for an op the dtype has no meaning for (FDIV of ints, SHL of floats, SUB of bools), ValueError for
    an integer to a negative power, and AluUndefined (strict=True only) where C's behaviour is undefined.
    """
    op = Ops[op] if isinstance(op, str) else op
    spec = ALU.get(op)
    if spec is None:
        raise ValueError(f"{op!r} is not an ALU op")
    if len(operands) != spec.arity:
        raise TypeError(f"{op.name} takes {spec.arity} operands, got {len(operands)}")
    dt = dtype.scalar
    if op in GroupOp.Comparison:
        return bool(spec.scalar(dt, strict, *operands))
    if dt.kind not in spec.kinds:
        raise TypeError(f"{op.name} does not compute in {dt.name}")
    if op is Ops.WHERE:
        c, a, b = operands
        return spec.scalar(dt, strict, bool(c), as_dtype(dt, a, strict), as_dtype(dt, b, strict))
    return spec.scalar(dt, strict, *[as_dtype(dt, v, strict) for v in operands])


def reduce_identity(op: Ops, dtype: DType) -> Scalar:
    """The start value of a REDUCE of `op` (ADD, MUL or MAX) in `dtype`: op(identity, x) == x."""
    dt = dtype.scalar
    start = {Ops.ADD: 0, Ops.MUL: 1}.get(op)
    if start is None:
        if op is not Ops.MAX:
            raise ValueError(f"REDUCE of {op!r}: expected Ops.ADD, Ops.MUL or Ops.MAX")
        start = dt.min  # -inf for floats, False for bool
    return as_dtype(dt, start)
