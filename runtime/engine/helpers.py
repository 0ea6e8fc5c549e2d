"""The functions rule expressions may call, by name.

This registry is the whole vocabulary of guards and computed args beyond
operators and attribute access: the rule compiler rejects any other call.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from rulec.runtime.ir.alu import ALU, AluUndefined
from rulec.runtime.ir.bounds import c_div, c_mod
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.engine.genlib import ExprLimitError, brief, check_result
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp


# ---- bounds on what one expression may build. Every other operator grows its result by at most a
# constant number of bits or items, so an expression of bounded text over 64-bit inputs stays small;
# these are the ones that do not, plus the iteration source.
INT_BITS = 128  # `**` and `<<` results: room for a product of two 64-bit values, as `fits_int64(a * b)` needs
SEQ_LIMIT = 4096  # items of a range() and of a sequence built by repetition or by sum()
# `*` of integers: a comprehension may bind a product and square it again in a nested one
# (`all(... for b in [prod([a, a])])`), doubling its bits at each level; far above any 64-bit check
PRODUCT_BITS = 1024

_SEQUENCES = (str, bytes, tuple, list)


def bounded_pow(a: Any, b: Any) -> Any:
    """`a ** b`, refusing an integer result of more than INT_BITS bits before computing it."""
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        if (abs(a).bit_length() - 1) * b + 1 > INT_BITS:
            raise ExprLimitError(f"{_short(a)} ** {_short(b)} has more than {INT_BITS} bits")
        r = a ** b  # at most twice INT_BITS bits: cheap
        if r.bit_length() > INT_BITS:
            raise ExprLimitError(f"{_short(a)} ** {_short(b)} has more than {INT_BITS} bits")
        return r
    return a ** b


def bounded_lshift(a: Any, b: Any) -> Any:
    """`a << b`, refusing an integer result of more than INT_BITS bits before computing it."""
    if isinstance(a, int) and isinstance(b, int) and a and b > 0 and abs(a).bit_length() + b > INT_BITS:
        raise ExprLimitError(f"{_short(a)} << {_short(b)} has more than {INT_BITS} bits")
    return a << b


def bounded_mul(a: Any, b: Any) -> Any:
    """`a * b`; a sequence repeated into more than SEQ_LIMIT items, or an integer product of more than
    PRODUCT_BITS bits, is refused before it is built."""
    if type(a) is int and type(b) is int:  # the common case, first
        if a.bit_length() + b.bit_length() > PRODUCT_BITS:
            _product_too_large(a, b)
        return a * b
    if isinstance(a, _SEQUENCES) and isinstance(b, int):
        _check_len(len(a), b, a)
    elif isinstance(b, _SEQUENCES) and isinstance(a, int):
        _check_len(len(b), a, b)
    return a * b


def _product_too_large(a: int, b: int) -> None:
    raise ExprLimitError(f"{_short(a)} * {_short(b)} has more than {PRODUCT_BITS} bits")


def bounded_prod(xs: Any) -> Any:
    """`prod(xs)`, with every step bounded as `*` is."""
    total = 1
    for v in xs:
        total = bounded_mul(total, v) if type(v) is int and type(total) is int else total * v
    return total


def _check_len(n: int, times: int, seq: Any) -> None:
    if n and times > 0 and n * times > SEQ_LIMIT:
        raise ExprLimitError(f"a {type(seq).__name__} of {n} repeated {_short(times)} times has more than "
                             f"{SEQ_LIMIT} items")


def bounded_mod(a: Any, b: Any) -> Any:
    """`a % b`; with a string on the left that is formatting, refused as it is for a string literal
    ('%0999999999d' % 1 is as large as it looks)."""
    if isinstance(a, (str, bytes)):
        raise ExprLimitError(f"string formatting with % is not allowed in rule expressions ({brief(a, 40)} % ...)")
    return a % b


MAX_VALUE_DEPTH = 32  # tuples in tuples in a node's arg or tag


def bounded_value(value: Any) -> Any:
    """`value` unchanged if it is small enough to put into a node's arg or tag.

    A node's arg and tag are hashed and compared whole at every rewrite, and a rule may build them from the
    node's own (`(replace n :tag {(n.tag, n.tag)})`), so their size could double at each step. At most
    SEQ_LIMIT items in all (a string counts its characters), nested at most MAX_VALUE_DEPTH deep. Counting
    stops at the limit, so a huge value costs no more to refuse than a small one to accept.
    """
    if type(value) in (int, float, bool) or value is None:  # the common case, first
        return value
    count, stack = 0, [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            raise ExprLimitError(f"a result nests tuples or lists more than {MAX_VALUE_DEPTH} deep")
        if isinstance(v, (tuple, list)):
            count += len(v)
            stack.extend((x, depth + 1) for x in v[:SEQ_LIMIT + 1])
        elif isinstance(v, (str, bytes, range)):
            count += len(v)
        else:
            count += 1
        if count > SEQ_LIMIT:
            raise ExprLimitError(f"a result holds more than {SEQ_LIMIT} items (strings count their characters)")
    return value


def bounded_range(*args: int) -> range:
    """`range(...)` of at most SEQ_LIMIT numbers (the only source of iteration not bounded by the graph)."""
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:  # longer than sys.maxsize
        n = SEQ_LIMIT + 1
    if n > SEQ_LIMIT:
        raise ExprLimitError(f"range({', '.join(_short(a) for a in args)}) has more than {SEQ_LIMIT} numbers")
    return r


def bounded_sum(xs: Any, start: Any = 0) -> Any:
    """`sum(xs, start)`; summing sequences (`sum(lists, [])`) stops at SEQ_LIMIT items."""
    if not isinstance(start, _SEQUENCES):
        return sum(xs, start)
    total = start
    for x in xs:
        if isinstance(x, _SEQUENCES) and len(total) + len(x) > SEQ_LIMIT:
            raise ExprLimitError(f"sum() of sequences has more than {SEQ_LIMIT} items")
        total = total + x
    return total


def _short(v: Any) -> str:
    """A number as shown in a limit message: huge integers by their size, not their digits."""
    if isinstance(v, int) and v.bit_length() > 64:
        return f"<an integer of {v.bit_length()} bits>"
    return repr(v)


# The operators an expression's `**`, `<<`, `*` and `%` compile to (exprs.py), by the name the generated
# module gives them.
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "_op_pow": bounded_pow, "_op_lshift": bounded_lshift, "_op_mul": bounded_mul, "_op_mod": bounded_mod,
}


def argsort(xs: Any) -> tuple[int, ...]:
    return tuple(sorted(range(len(xs)), key=lambda i: xs[i]))


def const_like(node: UOp, value: Any) -> UOp:
    """A CONST with the dtype of `node`."""
    return node.const_like(check_result(value))


def const(dtype: DType, value: Any) -> UOp:
    return UOp.const(dtype, check_result(value))


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


def _int_operand(fn: str, x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError(f"{fn}() takes an integer, not {type(x).__name__} {brief(x, 40)}")
    return x


def bit_length(x: int) -> int:
    """The number of bits of |x| (0 for 0), as int.bit_length: `1 << bit_length(n - 1)` is the power of two
    at or above n. Bounded by its operand: expressions build integers of at most PRODUCT_BITS bits."""
    return _int_operand("bit_length", x).bit_length()


def log2(x: int) -> int:
    """The exact base-2 logarithm of a power of two (log2(8) == 3). Anything else (0, a negative number,
    6, a float) is a ValueError or TypeError, which names the rule: no silent rounding down."""
    if _int_operand("log2", x) <= 0 or x & (x - 1):
        raise ValueError(f"log2({_short(x)}): not a power of two")
    return x.bit_length() - 1


# The ops a constant fold evaluates: integer arithmetic, bool logic and integer comparisons, the fragment
# whose exact value the egglog engine can mirror in i64 (rulec/egglog_forms.py, FOLD_ALU). POW and
# FDIV are left alone: neither has been folded before, and egglog has no exact i64 power.
_FOLD_ARITH = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.NEG, Ops.SHL, Ops.SHR})
_FOLD_LOGIC = frozenset({Ops.AND, Ops.OR, Ops.XOR})
_FOLD_COMPARE = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
FOLDED_OPS = _FOLD_ARITH | _FOLD_LOGIC | _FOLD_COMPARE
_FOLD_SHIFTS = frozenset({Ops.SHL, Ops.SHR})
# the exact value of an integer op: runtime/ir/alu.py's semantics in a width no 64-bit operands can overflow
_EXACT = DType("exact", 32, "int", 0)


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _in_int64(*vals: Any) -> bool:
    for v in vals:
        if not _I64_MIN <= v <= _I64_MAX:
            return False
    return True


def fold_alu(n: UOp) -> Any:
    """The constant that ALU node `n`, whose sources are all CONSTs, computes; None where folding it would
    change the program's meaning.

    The value is runtime/ir/alu.py's (the one ALU semantics the interpreters are checked against), computed
    strictly, so C's undefined behaviour declines: division by zero, signed overflow, a shift by the
    width or more. Beyond that a fold declines a shift of a negative value, a result its dtype cannot
    hold exactly (unsigned wrap-around included) and values outside int64, which egglog computes in:
    the result, and the operands of MAX, SHR, bit logic and comparisons. Comparisons fold on integer
    operands; AND, OR and XOR also on bools; floats never (x*0 is not 0 for nan)."""
    op = n.op
    if op not in FOLDED_OPS:
        return None
    vals = []
    for s in n.src:  # a loop, not all(): this runs on every candidate node of a rewrite
        if s.op is not Ops.CONST or not isinstance(s.arg, int):
            return None
        vals.append(s.arg)
    dt = n.dtype.scalar
    scalar = ALU[op].scalar  # the table alu_eval reads; a CONST's arg is already a value of its dtype
    try:
        if op in _FOLD_COMPARE:
            return bool(scalar(dt, False, *vals)) if n.src[0].dtype.scalar.is_int and _in_int64(*vals) else None
        if op in _FOLD_LOGIC:
            return scalar(dt, False, *vals) if (dt.is_int or dt.kind == "bool") and _in_int64(*vals) else None
        if not dt.is_int or (op is Ops.MAX and not _in_int64(*vals)) or (op is Ops.SHR and not _in_int64(vals[0])):
            return None
        if op in _FOLD_SHIFTS and vals[0] < 0:
            return None
        v = scalar(dt, True, *vals)  # strict: signed overflow, division by zero and wide shifts raise
        # unsigned arithmetic wraps without raising: the fold must be the exact value
        if dt.kind == "uint" and v != scalar(_EXACT, True, *vals):
            return None
    except (AluUndefined, ArithmeticError, TypeError, ValueError):
        return None
    return v if _I64_MIN <= v <= _I64_MAX else None


HELPERS: dict[str, Callable[..., Any]] = {
    # Python builtins that cannot escape the expression language
    "len": len, "min": min, "max": max, "abs": abs, "all": all, "any": any, "sum": bounded_sum,
    "int": int, "float": float, "bool": bool, "tuple": tuple, "range": bounded_range, "sorted": sorted,
    "zip": zip, "enumerate": enumerate, "isinstance_int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    # arithmetic with the IR's semantics
    "c_div": c_div, "c_mod": c_mod, "gcd": math.gcd, "prod": bounded_prod, "argsort": argsort,
    "fits_int64": fits_int64, "fits_dtype": fits_dtype, "ceil_div": ceil_div,
    # nodes
    "const_like": const_like, "const": const, "identity_element": identity_element,
    "is_const": is_const, "is_int": is_int, "all_same": all_same,
    "bit_length": bit_length, "log2": log2, "fold_alu": fold_alu,
}

# Names an expression may use as namespaces: `Ops.ADD`, `dtypes.float32`, `GroupOp.Movement` (the op groups of
# rules/ops.yaml, as frozensets: `x.op in GroupOp.AlwaysContiguous`).
NAMESPACES: dict[str, Any] = {"Ops": Ops, "dtypes": dtypes, "GroupOp": GroupOp}

# Attributes an expression may read on any value (UOps, dtypes, ops, tuples).
ATTRIBUTES: frozenset[str] = frozenset({
    "op", "dtype", "src", "arg", "tag", "shape", "size", "ndim", "vmin", "vmax", "base", "ranges",
    "itemsize", "kind", "is_int", "is_float", "is_unsigned", "scalar", "addrspace", "name",
})

