"""The ALU semantics table (runtime/ir/alu.py): its meaning on scalars, worked out by hand, and the two numpy
oracles (the kernel interpreter and the tensor-level evaluator) agreeing with it op by op, dtype by dtype."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from rulec.runtime import buffers
from rulec.runtime.ir.alu import ALU, AluUndefined, alu_eval, as_dtype, reduce_identity, round_float
from rulec.runtime.interpret.alu_numpy import ARRAY
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.interpret.interpret import InterpretError, np_dtype, run_kernel
from rulec.runtime.interpret.lazy_eval import evaluate
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp

i8, i32, i64, u8, u32 = dtypes.int8, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint32
f16, bf16, f32, f64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ------------------------------------------------------------------ the table


def test_the_table_covers_the_alu_group_and_the_array_table_matches_it():
    assert set(ALU) == set(GroupOp.ALU)
    assert set(ARRAY) == set(ALU)
    assert all(len(ALU[op].kinds) > 0 and 1 <= ALU[op].arity <= 3 for op in ALU)


def test_importing_the_table_does_not_import_numpy():
    # constant folding evaluates ops at rewrite time: it must not pay for numpy
    code = "import sys, rulec.runtime.ir.alu; assert 'numpy' not in sys.modules, 'numpy imported'"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_op_by_name_arity_and_non_alu_ops():
    assert alu_eval("ADD", i32, 2, 3) == 5
    with pytest.raises(ValueError, match="not an ALU op"):
        alu_eval(Ops.LOAD, i32, 1)
    with pytest.raises(TypeError, match="takes 2 operands"):
        alu_eval(Ops.ADD, i32, 1)


@pytest.mark.parametrize("op, dt", [(Ops.FDIV, i32), (Ops.SHL, f32), (Ops.SUB, dtypes.bool), (Ops.SQRT, i32),
                                    (Ops.AND, f32), (Ops.ADD, dtypes.void)])
def test_ops_outside_their_dtypes_are_refused(op, dt):
    with pytest.raises(TypeError):
        alu_eval(op, dt, *[1] * ALU[op].arity)


# ------------------------------------------------------------------ integers


@pytest.mark.parametrize("op, dt, args, want", [
    (Ops.ADD, i8, (127, 1), -128),
    (Ops.SUB, u8, (0, 1), 255),
    (Ops.MUL, i32, (65536, 65536), 0),
    (Ops.MUL, u32, (65537, 65537), 131073),  # 2**32 + 2*65536 + 1, wrapped
    (Ops.NEG, i8, (-128,), -128),
    (Ops.NEG, u8, (1,), 255),
    (Ops.ADD, i8, (200, 0), -56),  # operands are converted to the dtype first
    (Ops.IDIV, i32, (7, -2), -3), (Ops.MOD, i32, (7, -2), 1),
    (Ops.IDIV, i32, (-7, 2), -3), (Ops.MOD, i32, (-7, 2), -1),
    (Ops.IDIV, i32, (-7, -2), 3), (Ops.MOD, i32, (-7, -2), -1),
    (Ops.IDIV, i32, (INT32_MIN, -1), INT32_MIN), (Ops.MOD, i32, (INT32_MIN, -1), 0),
    (Ops.IDIV, i32, (5, 0), 0), (Ops.MOD, i32, (5, 0), 0),
    (Ops.RECIP, i32, (0,), 0), (Ops.RECIP, i32, (-1,), -1), (Ops.RECIP, i32, (2,), 0),
    (Ops.SHL, i32, (1, 31), INT32_MIN), (Ops.SHL, i32, (1, 32), 0), (Ops.SHL, i32, (1, -1), 0),
    (Ops.SHL, u8, (255, 1), 254), (Ops.SHL, u8, (1, 8), 0),
    (Ops.SHR, i32, (-8, 1), -4), (Ops.SHR, i32, (-8, 40), -1), (Ops.SHR, i32, (8, 40), 0),
    (Ops.POW, i8, (3, 5), -13), (Ops.POW, i32, (-2, 3), -8), (Ops.POW, i32, (0, 0), 1),
    (Ops.POW, i64, (3, 10**6), int(np.power(np.int64(3), np.int64(10**6)))),  # numpy wraps at every step
    (Ops.MAX, i8, (-1, -128), -1),
    (Ops.AND, i8, (-1, 0x5A), 0x5A), (Ops.OR, u8, (0xF0, 0x0F), 255), (Ops.XOR, i8, (-1, 1), -2),
    (Ops.MULACC, i8, (16, 16, 1), 1),
    (Ops.TRUNC, i32, (-7,), -7),
    (Ops.ADD, dtypes.index, (2**63 - 1, 1), -(2**63)),  # index computes in int64
])
def test_integer_semantics(op, dt, args, want):
    got = alu_eval(op, dt, *args)
    assert got == want and type(got) is int


@pytest.mark.parametrize("op, args, want", [
    (Ops.ADD, (True, True), True), (Ops.MUL, (True, False), False), (Ops.MAX, (False, True), True),
    (Ops.NEG, (True,), False), (Ops.XOR, (True, True), False), (Ops.WHERE, (0, True, False), False),
])
def test_bool_semantics(op, args, want):
    assert alu_eval(op, dtypes.bool, *args) is want


def test_integer_to_a_negative_power_is_an_error():
    with pytest.raises(ValueError):
        alu_eval(Ops.POW, i32, 2, -1)


@pytest.mark.parametrize("op, dt, args", [
    (Ops.ADD, i32, (INT32_MAX, 1)), (Ops.MUL, dtypes.index, (2**62, 2)), (Ops.NEG, i8, (-128,)),
    (Ops.IDIV, i32, (INT32_MIN, -1)), (Ops.IDIV, u32, (1, 0)), (Ops.MOD, i32, (1, 0)), (Ops.RECIP, i32, (0,)),
    (Ops.SHL, i32, (1, 32)), (Ops.SHL, i32, (1, -1)), (Ops.SHL, i32, (-1, 1)), (Ops.SHL, i32, (1, 31)),
    (Ops.SHR, i32, (1, 32)), (Ops.POW, i32, (2, 31)), (Ops.POW, i32, (-2, 32)), (Ops.POW, i64, (3, 10**6)),
    (Ops.MULACC, i32, (2**16, 2**16, -1)),  # the product overflows before the add brings it back
    (Ops.ADD, i8, (200, 0)),  # an operand that does not fit
])
def test_strict_refuses_what_c_leaves_undefined(op, dt, args):
    alu_eval(op, dt, *args)  # defined here: the interpreter's answer
    with pytest.raises(AluUndefined):
        alu_eval(op, dt, *args, strict=True)


@pytest.mark.parametrize("op, dt, args, want", [
    (Ops.SUB, u32, (0, 1), 2**32 - 1),  # unsigned arithmetic wraps in C
    (Ops.POW, u8, (3, 200), pow(3, 200, 256)), (Ops.POW, dtypes.uint64, (3, 2**63), pow(3, 2**63, 2**64)),
    (Ops.NEG, u8, (1,), 255),
    (Ops.SHR, i32, (-8, 1), -4), (Ops.SHL, u8, (255, 1), 254), (Ops.POW, i32, (2, 30), 2**30),
    (Ops.IDIV, i32, (-7, 2), -3), (Ops.FDIV, f32, (1.0, 0.0), math.inf),
])
def test_strict_computes_what_c_defines(op, dt, args, want):
    assert alu_eval(op, dt, *args, strict=True) == want


# ------------------------------------------------------------------ floats


@pytest.mark.parametrize("op, dt, args, want", [
    (Ops.ADD, f32, (1.0, 2**-24), 1.0),  # halfway: to even
    (Ops.ADD, f32, (1.0, 3 * 2**-25), 1.0 + 2**-23),
    (Ops.ADD, f64, (1.0, 2**-24), 1.0 + 2**-24),
    (Ops.ADD, f16, (65504.0, 15.0), 65504.0), (Ops.ADD, f16, (65504.0, 16.0), math.inf),
    (Ops.ADD, bf16, (1.0, 2**-8), 1.0), (Ops.ADD, bf16, (1.0, 3 * 2**-9), 1.0 + 2**-7),
    (Ops.MUL, f32, (1e30, 1e30), math.inf),
    (Ops.FDIV, f32, (1.0, 0.0), math.inf), (Ops.FDIV, f32, (-1.0, 0.0), -math.inf),
    (Ops.FDIV, f32, (1.0, -0.0), -math.inf), (Ops.FDIV, f32, (1.0, 3.0), 0.3333333432674408),
    (Ops.IDIV, f32, (-7.0, 2.0), -3.0), (Ops.MOD, f32, (-7.0, 2.0), -1.0), (Ops.MOD, f64, (5.5, math.inf), 5.5),
    (Ops.RECIP, f32, (-0.0,), -math.inf), (Ops.RECIP, f16, (2**-24,), math.inf),
    (Ops.SQRT, f32, (2.0,), 1.4142135381698608), (Ops.LOG2, f32, (0.0,), -math.inf),
    (Ops.LOG2, f32, (8.0,), 3.0), (Ops.EXP2, f32, (128.0,), math.inf), (Ops.EXP2, f64, (2000.0,), math.inf),
    (Ops.EXP2, f64, (-math.inf,), 0.0), (Ops.TRUNC, f32, (-2.5,), -2.0), (Ops.TRUNC, f32, (math.inf,), math.inf),
    (Ops.POW, f32, (10.0, 39.0), math.inf), (Ops.POW, f64, (-0.0, -1.0), -math.inf),
    (Ops.POW, f64, (0.0, -2.0), math.inf), (Ops.POW, f64, (-10.0, 401.0), -math.inf),
    (Ops.POW, f64, (-1.0, math.inf), 1.0),
    (Ops.MAX, f32, (-1.0, -math.inf), -1.0),
    # two roundings (multiply, then add), not a fused multiply-add: the fused result would be 2**-20
    (Ops.MULACC, f16, (1 + 2**-10, 1 + 2**-10, -(1 + 2**-9)), 0.0),
    (Ops.WHERE, f32, (math.nan, 1.0, 2.0), 1.0),  # NaN is true, as in C
    # bfloat16 computes in float32 and rounds the result: intermediates are float32 values
    (Ops.IDIV, bf16, (3.015625, 1.0078125), 2.0),  # the quotient 2.99224... would round to 3.0 in bfloat16
    (Ops.MULACC, bf16, (1.0078125, 1.0078125, -1.0078125), 0.00787353515625),
])
def test_float_semantics(op, dt, args, want):
    got = alu_eval(op, dt, *args)
    assert got == want and type(got) is float


@pytest.mark.parametrize("op, dt, args", [
    (Ops.FDIV, f32, (0.0, 0.0)), (Ops.MAX, f32, (math.nan, 1.0)), (Ops.MAX, f32, (1.0, math.nan)),
    (Ops.SQRT, f32, (-1.0,)), (Ops.LOG2, f64, (-1.0,)), (Ops.SIN, f64, (math.inf,)),
    (Ops.POW, f64, (-8.0, 1 / 3)), (Ops.MOD, f32, (1.0, 0.0)), (Ops.MOD, f32, (math.inf, 2.0)),
    (Ops.IDIV, f32, (0.0, 0.0)), (Ops.ADD, bf16, (math.nan, 1.0)),
])
def test_float_results_that_are_nan(op, dt, args):
    assert math.isnan(alu_eval(op, dt, *args))


@pytest.mark.parametrize("op, args", [(Ops.TRUNC, (-0.5,)), (Ops.SQRT, (-0.0,)), (Ops.NEG, (0.0,)),
                                      (Ops.MOD, (-4.0, 2.0))])
def test_negative_zero_is_kept(op, args):
    got = alu_eval(op, f32, *args)
    assert got == 0 and math.copysign(1.0, got) == -1.0


def test_comparisons_compare_as_given():
    assert alu_eval(Ops.CMPNE, dtypes.bool, math.nan, math.nan) is True
    assert alu_eval(Ops.CMPEQ, dtypes.bool, math.nan, math.nan) is False
    assert alu_eval(Ops.CMPLT, dtypes.bool, -1, 2**64) is True
    assert alu_eval(Ops.CMPLT, dtypes.bool, False, True) is True


def test_conversions():
    assert as_dtype(i8, 200) == -56 and as_dtype(i32, -1.7) == -1 and as_dtype(u8, -1) == 255
    assert as_dtype(dtypes.bool, 2) is True and as_dtype(f16, 1e5) == math.inf and as_dtype(f32, 2**200) == math.inf
    assert round_float(bf16, 1.0 + 2**-8 + 2**-20) == 1.0 + 2**-7  # above halfway: up
    with pytest.raises(ValueError):
        as_dtype(i32, math.nan)


@pytest.mark.parametrize("op, dt, want", [
    (Ops.ADD, f32, 0.0), (Ops.ADD, i32, 0), (Ops.MUL, i32, 1), (Ops.MUL, f16, 1.0), (Ops.MAX, i8, -128),
    (Ops.MAX, u8, 0), (Ops.MAX, f32, -math.inf), (Ops.MAX, bf16, -math.inf), (Ops.MAX, dtypes.bool, False),
    (Ops.MAX, dtypes.index, -(2**63)), (Ops.ADD, dtypes.bool, False),
])
def test_reduce_identity(op, dt, want):
    got = reduce_identity(op, dt)
    assert got == want and type(got) is type(want)


def test_reduce_identity_of_an_op_that_has_none():
    with pytest.raises(ValueError):
        reduce_identity(Ops.SUB, f32)


# ------------------------------------------------------------------ the numpy oracles agree with the table

DTYPES = [dt for dt in dtypes.all() if dt.kind != "void"]
FLOAT_BIG = {f16: 65504.0, bf16: 3.3895313892515355e38, f32: 3.4028234663852886e38, f64: 1.7976931348623157e308}
FLOAT_TINY = {f16: 2.0**-24, bf16: 2.0**-133, f32: 2.0**-149, f64: 5e-324}  # the smallest subnormals
# libm-style functions numpy may compute with its own (not correctly rounded) float loops
APPROXIMATE = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW}


def edge_values(dt: DType) -> list:
    if dt.kind == "bool":
        return [False, True]
    if dt.kind == "float":
        big, tiny = FLOAT_BIG[dt], FLOAT_TINY[dt]
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, 1e-3, 100.0, 2.0**0.5, math.inf, -math.inf, math.nan,
                big, -big, tiny]
        return [as_dtype(dt, v) for v in vals]
    width = 64 if dt.kind == "index" else 8 * dt.itemsize
    vals = [0, 1, 2, 3, 5, 7, width - 1, width, dt.max, dt.max - 1, dt.max // 2 + 1]
    if dt.kind != "uint":
        vals += [-1, -2, -3, -7, dt.min, dt.min + 1]
    return list(dict.fromkeys(vals))


def operand_grid(op: Ops, dt: DType) -> list[tuple]:
    vals = edge_values(dt)
    if ALU[op].arity == 1:
        return [(v,) for v in vals]
    if op is Ops.WHERE:
        return [(c, a, b) for c in (False, True) for a in vals[:9] for b in vals[:9]]
    if op is Ops.MULACC:
        return [(a, b, c) for a in vals[:8] for b in vals[:8] for c in vals[:8]]
    pairs = [(a, b) for a in vals for b in vals]
    if op is Ops.POW and dt.kind != "float":  # numpy refuses the whole array (see the test below)
        pairs = [(a, b) for a, b in pairs if b >= 0]
    return pairs


def cases() -> list:
    return [pytest.param(op, dt, id=f"{op.name}-{dt.name}") for op in ALU for dt in DTYPES if dt.kind in ALU[op].kinds]


def signature(op: Ops, dt: DType) -> tuple[DType, list[DType]]:
    """(the node's dtype, the operands' dtypes)."""
    if op in GroupOp.Comparison:
        return dtypes.bool, [dt, dt]
    if op is Ops.WHERE:
        return dt, [dtypes.bool, dt, dt]
    return dt, [dt] * ALU[op].arity


def columns(grid: list[tuple], in_dts: list[DType]) -> list[np.ndarray]:
    return [np.array([row[i] for row in grid], dtype=np_dtype(dt)) for i, dt in enumerate(in_dts)]


def run_interpreter(op: Ops, out_dt: DType, in_dts: list[DType], cols: list[np.ndarray]) -> np.ndarray:
    n = len(cols[0])
    r = UOp.range(n, 0)

    def glob(i: int, dt: DType) -> UOp:
        return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

    srcs = tuple(UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, dt, (glob(i + 1, dt), r)),)) for i, dt in enumerate(in_dts))
    out = np.zeros(n, np_dtype(out_dt))
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out_dt, (glob(0, out_dt), r)), UOp(op, out_dt, srcs), r))
    run_kernel(UOp.sink(st), [out, *cols])
    return out


def run_lazy(op: Ops, out_dt: DType, in_dts: list[DType], cols: list[np.ndarray]) -> np.ndarray:
    srcs = tuple(buffers.from_numpy(c, dt) for c, dt in zip(cols, in_dts))
    return evaluate(UOp(op, out_dt, srcs))


def ulp(dt: DType, x: float) -> float:
    """The distance from |x| to the next value of `dt` (from the one below, at the largest finite value)."""
    if dt is bf16:  # 16 fewer significand bits than float32
        return ulp(f32, x) * 2**16
    a = np.array(abs(x), np_dtype(dt))
    with np.errstate(over="ignore"):
        up = np.spacing(a)
    return float(up if np.isfinite(up) else np.spacing(np.nextafter(a, a.dtype.type(0))))


def agrees(op: Ops, dt: DType, got: object, want: object) -> bool:
    if isinstance(want, float):
        if math.isnan(want):
            return math.isnan(got)
        if op in APPROXIMATE and math.isfinite(want) and math.isfinite(got):
            return abs(got - want) <= ulp(dt, want)
    return got == want


def check_against_table(op: Ops, dt: DType, out: np.ndarray, grid: list[tuple], out_dt: DType, who: str) -> None:
    bad = []
    for row, got in zip(grid, out.tolist()):
        want = alu_eval(op, out_dt, *row)
        if not agrees(op, dt, got, want):
            bad.append(f"{op.name}{row} = {got!r}, the table says {want!r}")
    assert not bad, f"{who} disagrees with runtime/ir/alu.py on {len(bad)} of {len(grid)} {dt.name} cases:\n" + \
        "\n".join(bad[:10])


@pytest.mark.parametrize("op, dt", cases())
def test_interpreter_agrees_with_the_table(op, dt):
    grid = operand_grid(op, dt)
    out_dt, in_dts = signature(op, dt)
    out = run_interpreter(op, out_dt, in_dts, columns(grid, in_dts))
    check_against_table(op, dt, out, grid, out_dt, "the kernel interpreter")


@pytest.mark.parametrize("op, dt", cases())
def test_lazy_evaluator_agrees_with_the_table(op, dt):
    grid = operand_grid(op, dt)
    out_dt, in_dts = signature(op, dt)
    out = run_lazy(op, out_dt, in_dts, columns(grid, in_dts))
    if out_dt is bf16:  # lazy_eval keeps bfloat16 unrounded, in float32 (its docstring says why)
        out = np.array([round_float(bf16, v) for v in out.tolist()], np.float32)
    check_against_table(op, dt, out, grid, out_dt, "lazy_eval")


def test_integer_to_a_negative_power_fails_in_both_oracles():
    cols = [np.array([2], np.int32), np.array([-1], np.int32)]
    with pytest.raises(InterpretError):
        run_interpreter(Ops.POW, i32, [i32, i32], cols)
    with pytest.raises(ValueError):
        run_lazy(Ops.POW, i32, [i32, i32], cols)


@pytest.mark.parametrize("op, args", [(Ops.IDIV, (3.015625, 1.0078125)),
                                      (Ops.MULACC, (1.0078125, 1.0078125, -1.0078125))])
def test_bfloat16_intermediates_agree_in_the_interpreter(op, args):
    # values the edge grid does not reach: a bfloat16 op's intermediate result is a float32
    out_dt, in_dts = signature(op, bf16)
    out = run_interpreter(op, out_dt, in_dts, columns([args], in_dts))
    assert out.tolist() == [alu_eval(op, bf16, *args)]
