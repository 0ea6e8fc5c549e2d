"""The numpy reference interpreter of kernel ASTs (runtime/interpret/interpret.py), checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from rulec.backends.kernel_text import kernel_text
from rulec.runtime.interpret import interpret
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.interpret.interpret import InterpretError, OutOfBoundsError, run_kernel
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

f32 = dtypes.float32


def glob(i: int, size: int, dt: DType = f32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), arg=i)


def load(g: UOp, idx: UOp) -> UOp:
    return UOp(Ops.LOAD, g.dtype.scalar, (UOp(Ops.INDEX, g.dtype.scalar, (g, idx)),))


def store(g: UOp, idx: UOp, value: UOp, *ranges: UOp) -> UOp:
    return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, g.dtype.scalar, (g, idx)), value, *ranges))


def reduce(value: UOp, *ranges: UOp, op: Ops = Ops.ADD) -> UOp:
    return UOp(Ops.REDUCE, value.dtype, (value, *ranges), arg=op)


def gated(valid: UOp, idx: UOp) -> UOp:
    return UOp(Ops.WHERE, dtypes.index, (valid, idx, UOp(Ops.INVALID, dtypes.index)))


def kernel(*stores: UOp) -> UOp:
    return UOp.sink(*stores)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ the brief's kernels


def test_elementwise_add():
    r = UOp.range(16, 0)
    g0, g1, g2 = glob(0, 16), glob(1, 16), glob(2, 16)
    a, b, out = rand(16, seed=1), rand(16, seed=2), np.zeros(16, np.float32)
    run_kernel(kernel(store(g0, r, load(g1, r) + load(g2, r), r)), [out, a, b])
    np.testing.assert_array_equal(out, a + b)


def test_transpose():
    r0, r1 = UOp.range(3, 0), UOp.range(5, 1)
    g0, g1 = glob(0, 15), glob(1, 15)
    a, out = rand(3, 5), np.zeros(15, np.float32)
    # out[r1, r0] = a[r0, r1]
    run_kernel(kernel(store(g0, r1 * 3 + r0, load(g1, r0 * 5 + r1), r0, r1)), [out, a.reshape(-1)])
    np.testing.assert_array_equal(out.reshape(5, 3), a.T)


def test_row_sum():
    r0, r1 = UOp.range(4, 0), UOp.range(6, 1, "reduce")
    g0, g1 = glob(0, 4), glob(1, 24)
    a, out = rand(4, 6), np.zeros(4, np.float32)
    run_kernel(kernel(store(g0, r0, reduce(load(g1, r0 * 6 + r1), r1), r0)), [out, a.reshape(-1)])
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-6)


def test_matmul():
    M, N, K = 5, 7, 3
    r0, r1, r2 = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, "reduce")
    g0, g1, g2 = glob(0, M * N), glob(1, M * K), glob(2, K * N)
    a, b, out = rand(M, K, seed=1), rand(K, N, seed=2), np.zeros(M * N, np.float32)
    acc = reduce(load(g1, r0 * K + r2) * load(g2, r2 * N + r1), r2)
    run_kernel(kernel(store(g0, r0 * N + r1, acc, r0, r1)), [out, a.reshape(-1), b.reshape(-1)])
    np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-5, atol=1e-6)


def test_max_reduce_of_negative_values():
    # the MAX identity is -inf, not 0: a row of negative numbers keeps its maximum
    r0, r1 = UOp.range(3, 0), UOp.range(4, 1, "reduce")
    g0, g1 = glob(0, 3), glob(1, 12)
    a, out = -np.abs(rand(3, 4)) - 1, np.zeros(3, np.float32)
    run_kernel(kernel(store(g0, r0, reduce(load(g1, r0 * 4 + r1), r1, op=Ops.MAX), r0)), [out, a.reshape(-1)])
    np.testing.assert_array_equal(out, a.max(1))


def test_padding_with_gated_load():
    # out[i] = a[i-2] for 2 <= i < 7, else 0 (a 1-D pad of 2 before and 3 after)
    r = UOp.range(10, 0)
    g0, g1 = glob(0, 10), glob(1, 5)
    valid = (r >= 2) & (r < 7)
    a, out = rand(5), np.full(10, np.nan, np.float32)
    run_kernel(kernel(store(g0, r, load(g1, gated(valid, r - 2)), r)), [out, a])
    np.testing.assert_array_equal(out, np.pad(a, (2, 3)))


def test_flip():
    r0, r1 = UOp.range(4, 0), UOp.range(3, 1)
    g0, g1 = glob(0, 12), glob(1, 12)
    a, out = rand(4, 3), np.zeros(12, np.float32)
    run_kernel(kernel(store(g0, r0 * 3 + r1, load(g1, (3 - r0) * 3 + (2 - r1)), r0, r1)), [out, a.reshape(-1)])
    np.testing.assert_array_equal(out.reshape(4, 3), a[::-1, ::-1])


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int8, dtypes.int64, dtypes.index])
def test_integer_div_mod_truncate_toward_zero(dt):
    np_dt = interpret.np_dtype(dt)
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1], np_dt)
    b = np.array([2, 2, -2, -2, 3, -3, 5, -4], np_dt)
    r = UOp.range(8, 0)
    ga, gb, gq, gm = glob(0, 8, dt), glob(1, 8, dt), glob(2, 8, dt), glob(3, 8, dt)
    x, y = load(ga, r), load(gb, r)
    q, m = np.zeros(8, np_dt), np.zeros(8, np_dt)
    run_kernel(kernel(store(gq, r, x // y, r), store(gm, r, x % y, r)), [a, b, q, m])
    np.testing.assert_array_equal(q, [3, -3, -3, 3, 2, 2, 0, 0])
    np.testing.assert_array_equal(m, [1, -1, 1, -1, 0, 0, 0, 1])
    np.testing.assert_array_equal(q * b + m, a)  # C's identity a == (a/b)*b + a%b


def test_index_arithmetic_div_mod_on_ranges():
    # unflatten a range with // and %: out[r] = (r // 4) * 10 + r % 4
    r = UOp.range(12, 0)
    g0 = glob(0, 12, dtypes.int32)
    out = np.zeros(12, np.int32)
    run_kernel(kernel(store(g0, r, ((r // 4) * 10 + r % 4).cast(dtypes.int32), r)), [out])
    np.testing.assert_array_equal(out, [(i // 4) * 10 + i % 4 for i in range(12)])


def test_casts():
    vals = np.array([1.7, -1.7, 2.5, -0.2, 300.9, 0.0], np.float32)
    r = UOp.range(6, 0)
    g = glob(0, 6)
    x = load(g, r)
    outs = {dtypes.int32: np.zeros(6, np.int32), dtypes.uint8: np.zeros(6, np.uint8),
            dtypes.bool: np.zeros(6, np.bool_), dtypes.float16: np.zeros(6, np.float16)}
    stores = [store(glob(i + 1, 6, dt), r, x.cast(dt), r) for i, dt in enumerate(outs)]
    run_kernel(kernel(*stores), [vals, *outs.values()])
    np.testing.assert_array_equal(outs[dtypes.int32], [1, -1, 2, 0, 300, 0])  # truncation, like C
    np.testing.assert_array_equal(outs[dtypes.uint8], np.array([1, -1, 2, 0, 300, 0]).astype(np.uint8))
    np.testing.assert_array_equal(outs[dtypes.bool], vals != 0)
    np.testing.assert_array_equal(outs[dtypes.float16], vals.astype(np.float16))


def test_int_to_float_and_narrowing_wrap():
    r = UOp.range(4, 0)
    g0, g1, g2 = glob(0, 4, dtypes.int32), glob(1, 4), glob(2, 4, dtypes.int8)
    a = np.array([1, -2, 200, 2**20 + 1], np.int32)
    f, n = np.zeros(4, np.float32), np.zeros(4, np.int8)
    x = load(g0, r)
    run_kernel(kernel(store(g1, r, x.cast(f32) / 2.0, r), store(g2, r, x.cast(dtypes.int8), r)), [a, f, n])
    np.testing.assert_array_equal(f, a.astype(np.float32) / 2)
    np.testing.assert_array_equal(n, [1, -2, -56, 1])


def test_bfloat16_rounds_to_bfloat16_precision():
    r = UOp.range(3, 0)
    g0, g1 = glob(0, 3), glob(1, 3, dtypes.bfloat16)
    vals = np.array([1 + 2**-9, 1 + 3 * 2**-9, 3.0], np.float32)  # a tie to even (down), above a tie (up), exact
    out = np.zeros(3, np.float32)  # bfloat16 buffers are float32 arrays
    run_kernel(kernel(store(g1, r, load(g0, r).cast(dtypes.bfloat16), r)), [vals, out])
    np.testing.assert_array_equal(out, [1.0, 1 + 2**-7, 3.0])


def test_two_stores_in_one_kernel():
    r0, r1 = UOp.range(3, 0), UOp.range(4, 1, "reduce")
    g0, g1, g2 = glob(0, 12), glob(1, 12), glob(2, 3)
    a, doubled, sums = rand(3, 4), np.zeros(12, np.float32), np.zeros(3, np.float32)
    x = load(g0, r0 * 4 + r1)
    ast = kernel(store(g1, r0 * 4 + r1, x * 2.0, r0, r1), store(g2, r0, reduce(x, r1), r0))
    run_kernel(ast, [a.reshape(-1), doubled, sums])
    np.testing.assert_array_equal(doubled, a.reshape(-1) * 2)
    np.testing.assert_allclose(sums, a.sum(1), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 5, 16])
def test_symbolic_range_bound(n):
    var = UOp.variable("n", 1, 16)
    r = UOp.range(var, 0)
    g0, g1 = glob(0, 16), glob(1, 16)
    a, out = rand(16), np.zeros(16, np.float32)
    run_kernel(kernel(store(g0, r, load(g1, r) + var.cast(f32), r)), [out, a], {"n": n})
    np.testing.assert_array_equal(out[:n], a[:n] + n)
    np.testing.assert_array_equal(out[n:], 0)  # only n iterations ran


# ------------------------------------------------------------------ reduce semantics


def test_reduce_counts_iterations_the_value_ignores():
    # a sum of a constant over a range is extent * constant (the value is broadcast before reducing)
    r0, r1 = UOp.range(2, 0), UOp.range(5, 1, "reduce")
    g0 = glob(0, 2)
    out = np.zeros(2, np.float32)
    run_kernel(kernel(store(g0, r0, reduce(UOp.const(f32, 1.5), r1), r0)), [out])
    np.testing.assert_array_equal(out, [7.5, 7.5])


@pytest.mark.parametrize("op, expected", [(Ops.ADD, 0.0), (Ops.MUL, 1.0), (Ops.MAX, -np.inf)])
def test_empty_reduce_gives_identity(op, expected):
    var = UOp.variable("n", 0, 4)
    r0, r1 = UOp.range(2, 0), UOp.range(var, 1, "reduce")
    g0, g1 = glob(0, 2), glob(1, 8)
    out = np.zeros(2, np.float32)
    run_kernel(kernel(store(g0, r0, reduce(load(g1, r0 * 4 + r1), r1, op=op), r0)), [out, rand(8)], {"n": 0})
    np.testing.assert_array_equal(out, [expected, expected])


def test_integer_sum_accumulates_in_its_dtype():
    r0 = UOp.range(4, 0, "reduce")
    g0, g1 = glob(0, 1, dtypes.int8), glob(1, 4, dtypes.int8)
    a, out = np.array([100, 100, 100, -1], np.int8), np.zeros(1, np.int8)
    run_kernel(kernel(store(g0, UOp.const(dtypes.index, 0), reduce(load(g1, r0), r0))), [out, a])
    assert out[0] == np.int8(np.int64(299).astype(np.int8))  # wraps like an int8 accumulator


def test_product_and_int_max_reduce():
    r0 = UOp.range(5, 0, "reduce")
    g0, g1, g2 = glob(0, 5, dtypes.int32), glob(1, 1, dtypes.int32), glob(2, 1, dtypes.int32)
    a = np.array([-3, -7, 2, -1, -5], np.int32)
    p, m = np.zeros(1, np.int32), np.zeros(1, np.int32)
    zero, x = UOp.const(dtypes.index, 0), load(g0, r0)
    run_kernel(kernel(store(g1, zero, reduce(x, r0, op=Ops.MUL)), store(g2, zero, reduce(x, r0, op=Ops.MAX))),
               [a, p, m])
    assert (p[0], m[0]) == (np.prod(a), 2)


def test_softmax_nested_reduces():
    R, C = 3, 5
    r0, r1, r2 = UOp.range(R, 0), UOp.range(C, 1), UOp.range(C, 2, "reduce")
    r3 = UOp.range(C, 3, "reduce")
    g0, g1 = glob(0, R * C), glob(1, R * C)
    x = lambda r: load(g1, r0 * C + r)  # noqa: E731
    m = reduce(x(r2), r2, op=Ops.MAX)
    e = lambda r: ((x(r) - m) * 1.4426950408889634).alu(Ops.EXP2)  # noqa: E731
    ast = kernel(store(g0, r0 * C + r1, e(r1) * reduce(e(r3), r3).alu(Ops.RECIP), r0, r1))
    a, out = rand(R, C), np.zeros(R * C, np.float32)
    run_kernel(ast, [out, a.reshape(-1)])
    ref = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out.reshape(R, C), ref / ref.sum(1, keepdims=True), rtol=1e-5)


# ------------------------------------------------------------------ ALU coverage

_UNARY = [(Ops.NEG, np.negative), (Ops.SQRT, np.sqrt), (Ops.EXP2, np.exp2), (Ops.LOG2, np.log2),
          (Ops.SIN, np.sin), (Ops.RECIP, np.reciprocal), (Ops.TRUNC, np.trunc)]
_BINARY = [(Ops.ADD, np.add), (Ops.SUB, np.subtract), (Ops.MUL, np.multiply), (Ops.FDIV, np.true_divide),
           (Ops.MAX, np.maximum), (Ops.POW, np.power), (Ops.MOD, np.fmod)]


def _elementwise(op: Ops, dt: DType, out_dt: DType, *inputs: np.ndarray) -> np.ndarray:
    n = len(inputs[0])
    r = UOp.range(n, 0)
    srcs = tuple(load(glob(i + 1, n, dt), r) for i in range(len(inputs)))
    out = np.zeros(n, interpret.np_dtype(out_dt))
    run_kernel(kernel(store(glob(0, n, out_dt), r, UOp(op, out_dt, srcs), r)), [out, *inputs])
    return out


@pytest.mark.parametrize("op, ref", _UNARY, ids=[o.name for o, _ in _UNARY])
def test_float_unary(op, ref):
    x = np.abs(rand(8)) + 0.5
    np.testing.assert_allclose(_elementwise(op, f32, f32, x), ref(x), rtol=1e-6)


@pytest.mark.parametrize("op, ref", _BINARY, ids=[o.name for o, _ in _BINARY])
def test_float_binary(op, ref):
    a, b = np.abs(rand(8, seed=1)) + 0.5, rand(8, seed=2)
    np.testing.assert_allclose(_elementwise(op, f32, f32, a, b), ref(a, b), rtol=1e-6)


@pytest.mark.parametrize("op, ref", [(Ops.CMPLT, np.less), (Ops.CMPNE, np.not_equal), (Ops.CMPEQ, np.equal)])
def test_comparisons_give_bool(op, ref):
    a, b = np.array([1, 2, 3, -4], np.int32), np.array([2, 2, -3, -4], np.int32)
    out = _elementwise(op, dtypes.int32, dtypes.bool, a, b)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("op, ref", [(Ops.AND, np.bitwise_and), (Ops.OR, np.bitwise_or), (Ops.XOR, np.bitwise_xor),
                                     (Ops.SHL, np.left_shift), (Ops.SHR, np.right_shift)])
def test_bitwise(op, ref):
    a, b = np.array([12, 7, 255, 1], np.uint32), np.array([10, 1, 3, 31], np.uint32)
    np.testing.assert_array_equal(_elementwise(op, dtypes.uint32, dtypes.uint32, a, b), ref(a, b))


def test_where_and_mulacc():
    c = np.array([True, False, True], np.bool_)
    a, b, d = rand(3, seed=1), rand(3, seed=2), rand(3, seed=3)
    r = UOp.range(3, 0)
    gc, ga, gb, gd = glob(1, 3, dtypes.bool), glob(2, 3), glob(3, 3), glob(4, 3)
    value = UOp(Ops.MULACC, f32, (load(ga, r), load(gb, r), load(gd, r)))
    value = UOp(Ops.WHERE, f32, (load(gc, r), value, load(ga, r)))
    out = np.zeros(3, np.float32)
    run_kernel(kernel(store(glob(0, 3), r, value, r)), [out, c, a, b, d])
    np.testing.assert_allclose(out, np.where(c, a * b + d, a), rtol=1e-6)


def test_int_arithmetic_wraps_and_bool_neg_is_logical_not():
    a = np.array([2**31 - 1, -(2**31)], np.int32)
    np.testing.assert_array_equal(_elementwise(Ops.ADD, dtypes.int32, dtypes.int32, a, np.ones(2, np.int32)),
                                  [-(2**31), -(2**31) + 1])
    flags = np.array([True, False])
    np.testing.assert_array_equal(_elementwise(Ops.NEG, dtypes.bool, dtypes.bool, flags), ~flags)


# ------------------------------------------------------------------ masks and in-place kernels


def test_gated_store_skips_masked_lanes():
    r = UOp.range(8, 0)
    g0 = glob(0, 8)
    out = np.full(8, -1.0, np.float32)
    run_kernel(kernel(store(g0, gated(r < 3, r), r.cast(f32), r)), [out])
    np.testing.assert_array_equal(out, [0, 1, 2, -1, -1, -1, -1, -1])


def test_masked_lanes_are_not_bounds_checked():
    # the index is far out of bounds on masked lanes, both for the load and the store
    r = UOp.range(8, 0)
    g0, g1 = glob(0, 4), glob(1, 4)
    a, out = rand(4), np.zeros(4, np.float32)
    run_kernel(kernel(store(g0, gated(r < 4, r), load(g1, gated(r < 1, r * 100)), r)), [out, a])
    np.testing.assert_array_equal(out, [a[0], 0, 0, 0])


def test_nested_gates_combine():
    r = UOp.range(6, 0)
    g0, g1 = glob(0, 6), glob(1, 6)
    idx = UOp(Ops.WHERE, dtypes.index, (r > 0, gated(r < 5, r), UOp(Ops.INVALID, dtypes.index)))
    a, out = rand(6), np.full(6, 9.0, np.float32)
    run_kernel(kernel(store(g0, r, load(g1, idx), r)), [out, a])
    np.testing.assert_array_equal(out, [0, *a[1:5], 0])


def test_in_place_kernel_reads_the_buffer_before_writing():
    # out[i] = a[i + 1] on the same buffer: every load sees the kernel's input
    r = UOp.range(4, 0)
    g0 = glob(0, 5)
    a = np.arange(5, dtype=np.float32)
    run_kernel(kernel(store(g0, r, load(g0, r + 1) + load(g0, r), r)), [a])
    np.testing.assert_array_equal(a, [1, 3, 5, 7, 4])


def test_kernel_without_ranges():
    g0, g1 = glob(0, 1), glob(1, 3)
    zero, two = UOp.const(dtypes.index, 0), UOp.const(dtypes.index, 2)
    a, out = rand(3), np.zeros(1, np.float32)
    run_kernel(kernel(store(g0, zero, load(g1, two) * 3.0)), [out, a])
    np.testing.assert_allclose(out, [a[2] * 3], rtol=1e-6)


# ------------------------------------------------------------------ errors


def test_out_of_bounds_load_names_buffer_and_lane():
    r = UOp.range(5, 0)
    g0, g1 = glob(0, 5), glob(1, 4)
    with pytest.raises(OutOfBoundsError, match=r"LOAD out of bounds: index 4 into buffer 1 .*4 elements.* at r0=4"):
        run_kernel(kernel(store(g0, r, load(g1, r), r)), [np.zeros(5, np.float32), np.zeros(4, np.float32)])


def test_out_of_bounds_store_does_not_write():
    r = UOp.range(4, 0)
    g0 = glob(0, 4)
    out = np.zeros(4, np.float32)
    with pytest.raises(IndexError, match=r"STORE out of bounds: index -1 into buffer 0"):
        run_kernel(kernel(store(g0, r - 1, UOp.const(f32, 1.0), r)), [out])
    assert not out.any()


def test_bounds_use_the_declared_size():
    r = UOp.range(4, 0)
    g0, g1 = glob(0, 4), glob(1, 2)  # declares 2 elements of a 4-element array
    with pytest.raises(OutOfBoundsError, match="buffer 1"):
        run_kernel(kernel(store(g0, r, load(g1, r), r)), [np.zeros(4, np.float32), np.zeros(4, np.float32)])


def test_error_carries_kernel_text_as_note():
    r = UOp.range(5, 0)
    g0, g1 = glob(0, 5), glob(1, 4)
    with pytest.raises(OutOfBoundsError) as info:
        run_kernel(kernel(store(g0, r, load(g1, r), r)), [np.zeros(5, np.float32), np.zeros(4, np.float32)])
    assert any("buf0[r0] = buf1[r0];" in note for note in info.value.__notes__)


def test_missing_var_value():
    var = UOp.variable("n", 1, 8)
    r = UOp.range(var, 0)
    with pytest.raises(InterpretError, match=r"no value for variable 'n'"):
        run_kernel(kernel(store(glob(0, 8), r, UOp.const(f32, 0.0), r)), [np.zeros(8, np.float32)], {"m": 3})


def test_var_outside_declared_range():
    var = UOp.variable("n", 1, 8)
    r = UOp.range(var, 0)
    with pytest.raises(InterpretError, match=r"'n' = 9 is outside its declared range \[1, 8\]"):
        run_kernel(kernel(store(glob(0, 8), r, UOp.const(f32, 0.0), r)), [np.zeros(8, np.float32)], {"n": 9})


def test_memory_guard(monkeypatch):
    monkeypatch.setattr(interpret, "MAX_ELEMENTS", 100)
    r0, r1 = UOp.range(20, 0), UOp.range(20, 1)
    g0 = glob(0, 400)
    with pytest.raises(InterpretError, match=r"400 elements \(r0=20, r1=20\), more than .* limit of 100"):
        run_kernel(kernel(store(g0, r0 * 20 + r1, (r0 + r1).cast(f32), r0, r1)), [np.zeros(400, np.float32)])


def test_store_with_unclosed_range():
    r0, r1 = UOp.range(4, 0), UOp.range(4, 1)
    g0, g1 = glob(0, 4), glob(1, 16)
    with pytest.raises(InterpretError, match="STORE depends on r1 but neither it nor a REDUCE closes"):
        run_kernel(kernel(store(g0, r0, load(g1, r0 * 4 + r1), r0)), [np.zeros(4, np.float32), rand(16)])


def test_racing_store():
    r0, r1 = UOp.range(2, 0), UOp.range(3, 1)
    g0 = glob(0, 2)
    with pytest.raises(InterpretError, match="writes different values to index 0 of buffer 0"):
        run_kernel(kernel(store(g0, r0, r1.cast(f32), r0, r1)), [np.zeros(2, np.float32)])
    # the same value from every lane is a benign duplicate
    out = np.zeros(2, np.float32)
    run_kernel(kernel(store(g0, r0, r0.cast(f32), r0, r1)), [out])
    np.testing.assert_array_equal(out, [0, 1])


def test_buffer_dtype_mismatch():
    r = UOp.range(4, 0)
    with pytest.raises(InterpretError, match="buffer 0 holds float64, the kernel declares float32"):
        run_kernel(kernel(store(glob(0, 4), r, UOp.const(f32, 0.0), r)), [np.zeros(4)])


def test_invalid_outside_index_where():
    r = UOp.range(4, 0)
    bad = gated(r < 2, r) + 1
    with pytest.raises(InterpretError, match="INVALID may only appear"):
        run_kernel(kernel(store(glob(0, 8), bad, UOp.const(f32, 0.0), r)), [np.zeros(8, np.float32)])


def test_not_a_sink():
    r = UOp.range(4, 0)
    with pytest.raises(InterpretError, match="SINK of STOREs"):
        run_kernel(store(glob(0, 4), r, UOp.const(f32, 0.0), r), [np.zeros(4, np.float32)])


# ------------------------------------------------------------------ kernel_text


def test_kernel_text_of_matmul():
    r0, r1, r2 = UOp.range(2, 0), UOp.range(3, 1), UOp.range(4, 2, "reduce")
    g0, g1, g2 = glob(0, 6), glob(1, 8), glob(2, 12)
    acc = reduce(load(g1, r0 * 4 + r2) * load(g2, r2 * 3 + r1), r2)
    text = kernel_text(kernel(store(g0, r0 * 3 + r1, acc, r0, r1)))
    assert text == "\n".join([
        "kernel(float32 buf0[6], float32 buf1[8], float32 buf2[12]) {",
        "  for (int r0 = 0; r0 < 2; r0++) {",
        "    for (int r1 = 0; r1 < 3; r1++) {",
        "      float32 acc0 = 0.0;",
        "      for (int r2 = 0; r2 < 4; r2++) {",
        "        acc0 += buf1[(r0 * 4) + r2] * buf2[(r2 * 3) + r1];",
        "      }",
        "      buf0[(r0 * 3) + r1] = acc0;",
        "    }",
        "  }",
        "}",
    ])


def test_kernel_text_places_a_reduce_at_its_innermost_range():
    # out[r0, r1] = x[r0, r1] - sum_r2 x[r0, r2]: the sum reads r0 only, so it runs once per row
    r0, r1, r2 = UOp.range(2, 0), UOp.range(3, 1), UOp.range(3, 2, "reduce")
    g0, g1 = glob(0, 6), glob(1, 6)
    total = reduce(load(g1, r0 * 3 + r2), r2)
    text = kernel_text(kernel(store(g0, r0 * 3 + r1, load(g1, r0 * 3 + r1) - total, r0, r1)))
    assert text == "\n".join([
        "kernel(float32 buf0[6], float32 buf1[6]) {",
        "  for (int r0 = 0; r0 < 2; r0++) {",
        "    float32 acc0 = 0.0;",
        "    for (int r2 = 0; r2 < 3; r2++) {",
        "      acc0 += buf1[(r0 * 3) + r2];",
        "    }",
        "    for (int r1 = 0; r1 < 3; r1++) {",
        "      buf0[(r0 * 3) + r1] = buf1[(r0 * 3) + r1] - acc0;",
        "    }",
        "  }",
        "}",
    ])


def test_kernel_text_of_gates_vars_and_max():
    var = UOp.variable("n", 1, 8)
    r0, r1 = UOp.range(var, 0), UOp.range(4, 1, "reduce")
    g0, g1 = glob(0, 8), glob(1, 32)
    m = reduce(load(g1, gated(r1 < 3, r0 * 4 + r1)), r1, op=Ops.MAX)
    text = kernel_text(kernel(store(g0, gated(r0 < 6, r0), m, r0)))
    assert "kernel(float32 buf0[8], float32 buf1[32], int n /* 1..8 */) {" in text
    assert "for (int r0 = 0; r0 < n; r0++) {" in text
    assert "float32 acc0 = -INFINITY;" in text
    assert "acc0 = max(acc0, r1 < 3 ? buf1[(r0 * 4) + r1] : 0);" in text
    assert "if (r0 < 6) buf0[r0] = acc0;" in text


def test_bitcast():
    x = np.array([1.0, -2.0], np.float32)
    out = _elementwise(Ops.BITCAST, f32, dtypes.uint32, x)
    np.testing.assert_array_equal(out, x.view(np.uint32))


def test_lazy_eval_sums_products_without_building_them():
    """A float MUL read only by sums is evaluated as one einsum of its factors (runtime/interpret/lazy_eval.py):
    the same values as the plain product-then-sum, also where both factors broadcast the summed axis, and
    for empty arrays."""
    from rulec import Tensor
    from rulec.runtime.interpret.lazy_eval import evaluate

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    col = rng.standard_normal((3, 1)).astype(np.float32)
    cases = [
        (lambda: Tensor(a) @ Tensor(b), lambda: a @ b),
        (lambda: (Tensor(col).expand(3, 4) * Tensor(col).expand(3, 4)).sum(1), lambda: (col * col * 4)[:, 0]),
        (lambda: (Tensor(a) * 2).sum(0), lambda: (a * 2).sum(0)),
        (lambda: Tensor(np.zeros((0,), np.float32)) @ Tensor(np.zeros((0, 2), np.float32)), lambda: np.zeros(2)),
    ]
    for build, ref in cases:
        t = build()
        np.testing.assert_allclose(evaluate(t.uop), ref(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(evaluate(t.uop, wide=True), ref(), rtol=1e-5, atol=1e-5)
