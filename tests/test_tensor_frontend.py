"""The Tensor frontend (runtime/tensor/tensor.py), the buffer store (runtime/buffers.py) and the numpy oracle
(runtime/interpret/lazy_eval.py): every feature is checked against numpy computed directly here."""
from __future__ import annotations

import gc
import weakref
import math
import operator
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulec.runtime import buffers
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.interpret.lazy_eval import evaluate, evaluate_all
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.tensor.tensor import Tensor, least_upper_dtype
from rulec.runtime.ir.uop import UOp

RNG = np.random.default_rng(1234)


def data(*shape, lo=-2.0, hi=2.0, dtype=np.float32):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def check(t: Tensor, expected, rtol=1e-5, atol=1e-6):
    got = t.lazy_numpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert t.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def ops_in(t: Tensor) -> set:
    return {u.op for u in t.uop.toposort()}


# docs/tensor-ir.md: the only ops a frontend graph may contain
TENSOR_LEVEL_OPS = ({Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.CONST, Ops.IOTA, Ops.DEFINE_VAR, Ops.BIND, Ops.CAST,
                     Ops.REDUCE_AXIS, Ops.CONTIGUOUS, Ops.ASSIGN, Ops.DETACH}
                    | set(GroupOp.Movement)
                    | {Ops.ADD, Ops.MUL, Ops.SUB, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.NEG, Ops.RECIP,
                       Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND,
                       Ops.OR, Ops.XOR, Ops.WHERE})


def assert_contract(t: Tensor) -> None:
    """Ops of the contract only; ALU sources of one shape; buffers under a RESHAPE; EXPAND keeps rank."""
    assert ops_in(t) <= TENSOR_LEVEL_OPS, ops_in(t) - TENSOR_LEVEL_OPS
    for u in t.uop.toposort():
        if u.op in GroupOp.ALU:
            assert len({s.shape for s in u.src}) == 1, u
        if u.op is Ops.EXPAND:
            assert len(u.src[0].shape) == len(u.arg)
        if u.op is Ops.REDUCE_AXIS:
            assert u.arg[0] in (Ops.ADD, Ops.MAX, Ops.MUL) and u.dtype == u.src[0].dtype


# ============================================================================ buffers


def test_new_buffers_are_distinct_nodes():
    a, b = buffers.new_buffer_uop(dtypes.float32, 4), buffers.new_buffer_uop(dtypes.float32, 4)
    assert a is not b and a.src[0] is not b.src[0]
    assert a.op is Ops.BUFFER and a.arg == 4 and a.dtype == dtypes.float32 and a.shape == (4,)
    assert [s.op for s in a.src] == [Ops.UNIQUE, Ops.DEVICE] and a.src[1].arg == "CPU"


def test_buffer_get_set_roundtrip_and_alloc():
    buf = buffers.new_buffer_uop(dtypes.int16, 6)
    assert not buffers.is_allocated(buf)
    storage = buffers.ensure_allocated(buf)
    assert storage.shape == (6,) and storage.dtype == np.int16 and buffers.is_allocated(buf)
    buffers.set(buf, np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(buffers.get(buf), np.arange(6))
    assert buffers.get(buf).dtype == np.int16


def test_buffer_errors():
    buf = buffers.new_buffer_uop(dtypes.float32, 3)
    with pytest.raises(ValueError, match="3 elements"):
        buffers.set(buf, np.zeros(4))
    with pytest.raises(ValueError, match="BUFFER"):
        buffers.get(UOp.const(dtypes.float32, 1.0))
    with pytest.raises(ValueError):
        buffers.new_buffer_uop(dtypes.float32, -1)
    with pytest.raises(ValueError, match="complex"):
        buffers.from_numpy(np.zeros(2, dtype=np.complex64))


def test_buffer_dtypes():
    assert buffers.from_numpy(np.zeros(3, np.uint8)).dtype == dtypes.uint8
    bf = buffers.from_numpy(np.array([1.5, 2.5]), dtypes.bfloat16)
    assert bf.dtype == dtypes.bfloat16 and buffers.get(bf).dtype == np.float32


def test_buffer_store_is_weak():
    buf = buffers.from_numpy(np.arange(3))
    gc.collect()  # garbage of earlier tests must not be counted below
    n = len(buffers._store)
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is None and len(buffers._store) <= n - 1


# ============================================================================ lazy_eval


def _buf(values, dtype):
    arr = np.asarray(values)
    return UOp(Ops.RESHAPE, dtype, (buffers.from_numpy(arr, dtype),), arr.shape)


def test_lazy_eval_idiv_mod_truncate_toward_zero():
    a, b = _buf([7, -7, 7, -7], dtypes.int32), _buf([2, 2, -2, -2], dtypes.int32)
    np.testing.assert_array_equal(evaluate(UOp(Ops.IDIV, dtypes.int32, (a, b))), [3, -3, -3, 3])
    np.testing.assert_array_equal(evaluate(UOp(Ops.MOD, dtypes.int32, (a, b))), [1, -1, 1, -1])


def test_lazy_eval_rejects_implicit_broadcast():
    a, b = _buf([1.0, 2.0], dtypes.float32), UOp.const(dtypes.float32, 1.0)
    with pytest.raises(ValueError, match="broadcasting must be explicit"):
        evaluate(UOp(Ops.ADD, dtypes.float32, (a, b)))


def test_lazy_eval_checks_shapes_against_the_graph():
    a = _buf([[1.0, 2.0]], dtypes.float32)
    with pytest.raises(ValueError, match="EXPAND"):
        evaluate(UOp(Ops.EXPAND, dtypes.float32, (a,), (3, 2, 2)))


def test_lazy_eval_misc_ops():
    a = _buf([1.5, -2.5], dtypes.float32)
    np.testing.assert_array_equal(evaluate(UOp(Ops.CAST, dtypes.int32, (a,))), [1, -2])
    np.testing.assert_array_equal(evaluate(UOp(Ops.PAD, dtypes.float32, (a,), ((1, 2),))), [0, 1.5, -2.5, 0, 0])
    np.testing.assert_array_equal(evaluate(UOp(Ops.ASSIGN, dtypes.float32, (a, -a))), [-1.5, 2.5])
    np.testing.assert_array_equal(evaluate(UOp(Ops.FLIP, dtypes.float32, (a,), (True,))), [-2.5, 1.5])
    np.testing.assert_allclose(evaluate(UOp(Ops.RECIP, dtypes.float32, (a,))), [1 / 1.5, -1 / 2.5])
    bools = _buf([True, False], dtypes.bool)
    np.testing.assert_array_equal(evaluate(UOp(Ops.NEG, dtypes.bool, (bools,))), [False, True])


def test_lazy_eval_variables():
    v = UOp.variable("n", 0, 10)
    assert evaluate(v, var_vals={"n": 4}) == 4
    assert evaluate(UOp(Ops.BIND, dtypes.index, (v, UOp.const(dtypes.index, 3)))) == 3
    with pytest.raises(ValueError, match="'n'"):
        evaluate(v)


def test_lazy_eval_rejects_sink_and_kernel_ops():
    a = _buf([1.0], dtypes.float32)
    with pytest.raises(ValueError, match="SINK"):
        evaluate(UOp.sink(a))
    with pytest.raises(NotImplementedError, match="RANGE"):
        evaluate(UOp.range(4, 0))
    x, y = evaluate_all(a, a + a)
    assert x.tolist() == [1.0] and y.tolist() == [2.0]


def test_lazy_eval_integer_constants_wrap():
    t = Tensor(np.array([1, 2], np.uint8)) + 300  # a weak scalar takes the tensor's dtype
    assert t.dtype == dtypes.uint8
    check(t, np.array([1, 2], np.uint8) + np.uint8(300 % 256))


def test_lazy_eval_result_is_a_copy():
    t = Tensor([1.0, 2.0])
    t.lazy_numpy()[0] = 9.0
    assert t.lazy_numpy().tolist() == [1.0, 2.0]


# ============================================================================ construction


@pytest.mark.parametrize("value, dtype", [
    ([1.0, 2.0], dtypes.float32), ([1, 2], dtypes.int32), ([True, False], dtypes.bool), ([[1, 2.5]], dtypes.float32),
    ([], dtypes.float32), ([2**40], dtypes.int64),
    (np.array([1.0], np.float64), dtypes.float64), (np.array([1], np.int64), dtypes.int64),
    (np.array([1], np.uint8), dtypes.uint8), (np.array([1.0], np.float16), dtypes.float16),
    (2.5, dtypes.float32), (3, dtypes.int32), (True, dtypes.bool), (np.float64(1.0), dtypes.float64),
])
def test_construction_dtypes(value, dtype):
    t = Tensor(value)
    assert t.dtype == dtype
    check(t, np.asarray(value))


def test_construction_graph_is_buffer_plus_reshape():
    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t.uop.op is Ops.RESHAPE and t.uop.arg == (2, 3)
    buf = t.uop.src[0]
    assert buf.op is Ops.BUFFER and buf.arg == 6 and buffers.is_allocated(buf)
    # even 1-d data gets its (no-op) RESHAPE
    one = Tensor([1.0, 2.0])
    assert one.uop.op is Ops.RESHAPE and one.uop.src[0].op is Ops.BUFFER
    assert Tensor(2.0).uop.op is Ops.CONST and Tensor(2.0).shape == ()


def test_construction_with_dtype_and_copy():
    arr = np.array([1.7, -2.2])
    t = Tensor(arr, dtype=dtypes.int32)
    arr[0] = 100.0  # the tensor holds a copy
    assert t.dtype == dtypes.int32
    check(t, np.array([1, -2]))
    h = Tensor([1, 2], dtype=dtypes.float16)
    assert h.dtype == dtypes.float16 and h.lazy_numpy().dtype == np.float16
    assert Tensor(3, dtype=dtypes.float32).dtype == dtypes.float32


def test_construction_rejects_unknown_data():
    with pytest.raises(TypeError):
        Tensor("abc")
    with pytest.raises(TypeError):
        Tensor(["a", "b"])


def test_full_zeros_ones_empty():
    f = Tensor.full((2, 3), 3.0)
    assert f.dtype == dtypes.float32
    assert f.uop.op is Ops.EXPAND and f.uop.src[0].op is Ops.RESHAPE and f.uop.src[0].arg == (1, 1)
    assert f.uop.src[0].src[0].op is Ops.CONST
    check(f, np.full((2, 3), 3.0))
    assert Tensor.full((2,), 7).dtype == dtypes.int32
    assert Tensor.full((2,), True).dtype == dtypes.bool
    check(Tensor.zeros(2, 3), np.zeros((2, 3)))
    check(Tensor.ones((4,), dtype=dtypes.int8), np.ones(4))
    assert Tensor.ones(4, dtype=dtypes.int8).dtype == dtypes.int8
    check(Tensor.zeros(()), np.zeros(()))
    e = Tensor.empty(3, 2, dtype=dtypes.int32)
    assert e.shape == (3, 2) and e.dtype == dtypes.int32 and e.uop.src[0].op is Ops.BUFFER
    assert e.lazy_numpy().shape == (3, 2)
    t = Tensor(data(2, 2))
    check(t.zeros_like(), np.zeros((2, 2)))
    check(t.ones_like(), np.ones((2, 2)))
    check(t.full_like(5), np.full((2, 2), 5.0))


@pytest.mark.parametrize("args, kw", [((5,), {}), ((2, 9), {}), ((10, 0, -3), {}), ((0.5, 2.0, 0.25), {}),
                                      ((4,), {"dtype": dtypes.float32}), ((3, 3), {})])
def test_arange(args, kw):
    t = Tensor.arange(*args, **kw)
    expected = np.arange(*args)
    assert t.dtype == (kw.get("dtype") or (dtypes.float32 if expected.dtype.kind == "f" else dtypes.int32))
    check(t, expected)


def test_arange_zero_step():
    with pytest.raises(ValueError):
        Tensor.arange(0, 4, 0)


def test_rand_randn():
    r = Tensor.rand(3, 4, seed=5)
    assert r.shape == (3, 4) and r.dtype == dtypes.float32 and r.uop.src[0].op is Ops.BUFFER
    v = r.lazy_numpy()
    assert ((v >= 0) & (v < 1)).all()
    np.testing.assert_array_equal(v, Tensor.rand((3, 4), seed=5).lazy_numpy())
    n = Tensor.randn(2000, seed=1).lazy_numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert Tensor.randn(2, dtype=dtypes.float16).dtype == dtypes.float16
    assert Tensor.rand().shape == ()


def test_manual_seed():
    Tensor.manual_seed(42)
    a, b = Tensor.rand(5).lazy_numpy(), Tensor.rand(5).lazy_numpy()
    assert not np.array_equal(a, b)  # successive calls draw fresh values
    Tensor.manual_seed(42)
    np.testing.assert_array_equal(Tensor.rand(5).lazy_numpy(), a)
    np.testing.assert_array_equal(Tensor.rand(5).lazy_numpy(), b)


# ============================================================================ elementwise


A, B = data(3, 4), data(3, 4)
P = data(3, 4, lo=0.1, hi=3.0)


@pytest.mark.parametrize("name, fn, ref", [
    ("add", lambda a, b: a + b, lambda a, b: a + b),
    ("sub", lambda a, b: a - b, lambda a, b: a - b),
    ("mul", lambda a, b: a * b, lambda a, b: a * b),
    ("div", lambda a, b: a / b, lambda a, b: a / b),
    ("maximum", lambda a, b: a.maximum(b), np.maximum),
    ("minimum", lambda a, b: a.minimum(b), np.minimum),
    ("methods", lambda a, b: a.add(b).sub(a).mul(b).div(b), lambda a, b: (a + b - a) * b / b),
])
def test_binary(name, fn, ref):
    check(fn(Tensor(A), Tensor(B)), ref(A, B))


@pytest.mark.parametrize("fn, ref", [
    (lambda a: a + 2, lambda a: a + 2), (lambda a: 2 + a, lambda a: 2 + a),
    (lambda a: a - 1.5, lambda a: a - 1.5), (lambda a: 1.5 - a, lambda a: 1.5 - a),
    (lambda a: a * 3, lambda a: a * 3), (lambda a: 3 * a, lambda a: 3 * a),
    (lambda a: a / 4, lambda a: a / 4), (lambda a: 4 / a, lambda a: 4 / a),
    (lambda a: a ** 2, lambda a: a ** 2), (lambda a: a ** 0.5, np.sqrt), (lambda a: 2 ** a, lambda a: 2 ** a),
    (lambda a: a ** a, lambda a: a ** a), (lambda a: -a, lambda a: -a),
    (lambda a: a * np.float32(2), lambda a: a * 2), (lambda a: np.float32(2) * a, lambda a: a * 2),
])
def test_scalars_and_reflected(fn, ref):
    check(fn(Tensor(P)), ref(P), rtol=1e-5)


def test_ndarray_on_the_left_defers_to_tensor():
    t = np.ones((3, 4), np.float32) + Tensor(A)
    assert isinstance(t, Tensor)
    check(t, 1 + A)


def gelu_ref(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("name, ref, positive", [
    ("abs", np.abs, False), ("exp", np.exp, False), ("exp2", np.exp2, False), ("log", np.log, True),
    ("log2", np.log2, True), ("sqrt", np.sqrt, True), ("rsqrt", lambda x: 1 / np.sqrt(x), True),
    ("sin", np.sin, False), ("cos", np.cos, False), ("tan", np.tan, False),
    ("relu", lambda x: np.maximum(x, 0), False),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), False), ("tanh", np.tanh, False), ("gelu", gelu_ref, False),
    ("reciprocal", lambda x: 1 / x, True), ("square", np.square, False), ("neg", np.negative, False),
])
def test_unary(name, ref, positive):
    x = P if positive else A
    t = getattr(Tensor(x), name)()
    check(t, ref(x), rtol=2e-5, atol=2e-6)
    assert_contract(t)


def test_transcendentals_use_ir_ops():
    x = Tensor(A)
    assert Ops.EXP2 in ops_in(x.exp()) and Ops.LOG2 in ops_in(x.log())
    assert Ops.SIN in ops_in(x.cos()) and Ops.RECIP in ops_in(x.sigmoid())
    assert Ops.SQRT in ops_in(x.sqrt()) and Ops.RECIP in ops_in(x.rsqrt())


def test_unary_on_integers_computes_in_float():
    i = Tensor([1, 4, 9])
    assert i.sqrt().dtype == dtypes.float32
    check(i.sqrt(), [1.0, 2.0, 3.0])
    check(i.exp(), np.exp([1.0, 4.0, 9.0]), rtol=1e-5)
    check(Tensor([-3, 2]).abs(), [3, 2])
    assert Tensor([-3, 2]).abs().dtype == dtypes.int32
    check(Tensor(np.array([3, 200], np.uint8)).abs(), [3, 200])
    check(Tensor([-3, 2]).relu(), [0, 2])


def test_minimum_and_min_have_no_overflow_on_ints():
    lo = np.iinfo(np.int32).min
    a, b = np.array([lo, 5, -7], np.int32), np.array([0, lo, 3], np.int32)
    check(Tensor(a).minimum(Tensor(b)), np.minimum(a, b))
    check(Tensor(a).min(), a.min())
    u = np.array([0, 255, 7], np.uint8)
    check(Tensor(u).min(), 0)
    check(Tensor(u).minimum(9), np.minimum(u, 9))
    check(Tensor([True, False]).min(), False)


def test_where():
    c = A > B
    check(Tensor(c).where(Tensor(A), Tensor(B)), np.where(c, A, B))
    check(Tensor(c).where(1.0, 0.0), np.where(c, 1.0, 0.0))
    check(Tensor(c).where(Tensor(A), 0), np.where(c, A, 0))
    # broadcast between the condition and the values
    check(Tensor(c[:1]).where(Tensor(A), Tensor(B[0])), np.where(c[:1], A, B[0]))
    # a non-bool condition is cast to bool
    check(Tensor(np.array([0.0, 2.0])).where(1, 2), [2, 1])
    assert Tensor(c).where(1, 2).dtype == dtypes.int32
    assert Tensor(c).where(1, 2.0).dtype == dtypes.float32


@pytest.mark.parametrize("fn, ref", [
    (lambda a, b: a < b, np.less), (lambda a, b: a <= b, np.less_equal), (lambda a, b: a > b, np.greater),
    (lambda a, b: a >= b, np.greater_equal), (lambda a, b: a == b, np.equal), (lambda a, b: a != b, np.not_equal),
])
def test_comparisons(fn, ref):
    a = np.array([1.0, 2.0, 3.0, np.nan], np.float32)
    b = np.array([2.0, 2.0, 1.0, np.nan], np.float32)
    t = fn(Tensor(a), Tensor(b))
    assert t.dtype == dtypes.bool
    check(t, ref(a, b))
    check(fn(Tensor(a), 2.0), ref(a, 2.0))
    check(fn(2, Tensor(a)), ref(2, a))
    check(Tensor(a).eq(2.0), a == 2.0)
    check(Tensor(a).ne(2.0), a != 2.0)


def test_tensor_equality_builds_a_node_and_hash_is_identity():
    t = Tensor([1.0])
    assert isinstance(t == t, Tensor)
    assert len({t, Tensor([1.0]), t}) == 2
    with pytest.raises(TypeError):
        bool(t)


def test_logical_and_bitwise():
    x, y = np.array([True, True, False]), np.array([True, False, False])
    check(Tensor(x) & Tensor(y), x & y)
    check(Tensor(x) | Tensor(y), x | y)
    check(Tensor(x) ^ Tensor(y), x ^ y)
    check(~Tensor(x), ~x)
    check(Tensor(x).logical_not(), ~x)
    check(-Tensor(x), ~x)
    check(~Tensor(np.array([5, -1], np.int32)), np.array([~5, ~-1]))
    with pytest.raises(TypeError):
        ~Tensor([1.0])


def test_casts():
    t = Tensor(np.array([1.7, -2.5, 0.0], np.float32))
    assert t.int().dtype == dtypes.int32 and t.cast(dtypes.uint8).dtype == dtypes.uint8
    check(t.int(), np.array([1, -2, 0]))
    check(t.int().float(), np.array([1.0, -2.0, 0.0]))
    check(t.bool(), np.array([True, True, False]))
    check(t.half(), t.lazy_numpy().astype(np.float16))
    check(t.double(), t.lazy_numpy().astype(np.float64))
    check(t.long(), np.array([1, -2, 0]))
    assert t.cast(dtypes.float32) is t
    assert Ops.CAST in ops_in(t.int())


def test_clip():
    check(Tensor(A).clip(-0.5, 0.5), np.clip(A, -0.5, 0.5))


# ---------------------------------------------------------------- broadcasting


@pytest.mark.parametrize("sa, sb", [((3, 1), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((1,), (5, 1)), ((4,), (4,))])
def test_broadcasting(sa, sb):
    a, b = data(*sa), data(*sb)
    t = Tensor(a) * Tensor(b)
    check(t, a * b)
    assert_contract(t)


def test_broadcast_is_explicit_reshape_then_expand():
    t = Tensor(data(3, 1)) + Tensor(data(4))
    left, right = t.uop.src
    assert left.op is Ops.EXPAND and left.src[0].op is Ops.RESHAPE and left.src[0].arg == (3, 1)
    assert right.op is Ops.EXPAND and right.src[0].op is Ops.RESHAPE and right.src[0].arg == (1, 4)
    # a scalar is CONST.reshape((1,)*n).expand(shape)
    c = (Tensor(data(2, 3)) + 1.0).uop.src[1]
    assert c.op is Ops.EXPAND and c.src[0].op is Ops.RESHAPE and c.src[0].arg == (1, 1)
    assert c.src[0].src[0].op is Ops.CONST and c.src[0].src[0].arg == 1.0


def test_broadcast_error_names_shapes():
    with pytest.raises(ValueError, match=r"cannot broadcast \(3, 4\) with \(5,\)"):
        Tensor(data(3, 4)) + Tensor(data(5))


# ---------------------------------------------------------------- dtype promotion


@pytest.mark.parametrize("da, db, out", [
    (dtypes.int32, dtypes.float32, dtypes.float32), (dtypes.int8, dtypes.uint8, dtypes.int16),
    (dtypes.uint8, dtypes.int32, dtypes.int32), (dtypes.float16, dtypes.float32, dtypes.float32),
    (dtypes.bool, dtypes.int8, dtypes.int8), (dtypes.int64, dtypes.float16, dtypes.float16),
    (dtypes.float64, dtypes.float32, dtypes.float64), (dtypes.bool, dtypes.bool, dtypes.bool),
    (dtypes.bfloat16, dtypes.float16, dtypes.float32), (dtypes.bfloat16, dtypes.int32, dtypes.bfloat16),
    (dtypes.bfloat16, dtypes.float64, dtypes.float64), (dtypes.uint32, dtypes.int32, dtypes.int64),
])
def test_promotion_between_tensors(da, db, out):
    assert least_upper_dtype(da, db) == out == least_upper_dtype(db, da)
    a, b = Tensor([1, 0], dtype=da), Tensor([1, 1], dtype=db)
    assert (a + b).dtype == out and (b * a).dtype == out


NUMPY_NAMED = [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32,
               dtypes.int64, dtypes.float16, dtypes.float32, dtypes.float64]


def test_promotion_is_numpys_except_wide_int_with_float():
    """Every pair numpy has: numpy's result, except where numpy widens a float to hold an int of 16 bits or more
    (int32 + float32 -> float64). There the float's dtype wins, as in tinygrad, so the same program text gives
    the same dtypes on both."""
    for da in NUMPY_NAMED:
        for db in NUMPY_NAMED:
            ours = least_upper_dtype(da, db)
            theirs = np.result_type(buffers.numpy_dtype(da), buffers.numpy_dtype(db))
            floats = [d for d in (da, db) if d.is_float]
            if len(floats) == 1 and not (da.is_float and db.is_float) and (da.kind != "bool" and db.kind != "bool"):
                other = db if da.is_float else da
                if other.itemsize * 2 > floats[0].itemsize:  # numpy would need a wider float
                    assert ours == floats[0], (da, db, ours)
                    continue
            assert buffers.numpy_dtype(ours) == theirs, (da, db, ours, theirs)


@pytest.mark.parametrize("dt, scalar, out", [
    (dtypes.int8, 1, dtypes.int8), (dtypes.int32, 1.5, dtypes.float32), (dtypes.uint8, 2.0, dtypes.float32),
    (dtypes.float16, 1.0, dtypes.float16), (dtypes.float16, 1, dtypes.float16), (dtypes.bool, True, dtypes.bool),
    (dtypes.bool, 1, dtypes.int32), (dtypes.bool, 1.0, dtypes.float32), (dtypes.float64, 1, dtypes.float64),
    (dtypes.int64, 3, dtypes.int64),
])
def test_promotion_with_python_scalars(dt, scalar, out):
    t = Tensor([1, 0], dtype=dt)
    assert (t + scalar).dtype == out and (scalar * t).dtype == out


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.uint32, np.int64])
@pytest.mark.parametrize("scalar", [300, -1, 2**63, -2**40])
def test_comparing_with_a_python_int_the_dtype_cannot_hold(dt, scalar):
    # the scalar was wrapped into the dtype first: int8 == 300 compared with 44, uint32 < -1 with 2**32 - 1
    info = np.iinfo(dt)
    x = np.array([info.min, 0, 44, info.max], dt)
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        want = np.array([op(int(v), scalar) for v in x])
        np.testing.assert_array_equal(op(Tensor(x), scalar).numpy(), want, err_msg=op.__name__)
        np.testing.assert_array_equal(op(scalar, Tensor(x)).numpy(), [op(scalar, int(v)) for v in x])
    if info.min <= scalar <= info.max:
        return
    # clip compares with its bounds: int8's clip(0, 300) made everything above 44 44
    keep = Tensor(x).clip(scalar, None) if scalar < 0 else Tensor(x).clip(None, scalar)
    np.testing.assert_array_equal(keep.numpy(), x)
    np.testing.assert_array_equal((Tensor(x).maximum(scalar) if scalar < 0 else Tensor(x).minimum(scalar)).numpy(), x)


def test_division_and_result_dtypes():
    i = Tensor([7, -7])
    assert (i / 2).dtype == dtypes.float32 and (i / i).dtype == dtypes.float32
    check(i / 2, [3.5, -3.5])
    assert (Tensor([1.0], dtype=dtypes.float16) / 2).dtype == dtypes.float16
    assert (i < 2).dtype == dtypes.bool
    assert (i ** 2).dtype == dtypes.int32
    check(i ** 2, [49, 49])
    check(Tensor(np.array([1.0, 2.0])) + Tensor([1.0, 1.0]), [2.0, 3.0])  # float64 ndarray stays float64
    assert (Tensor(np.array([1.0, 2.0])) + Tensor([1.0, 1.0])).dtype == dtypes.float64
    check(Tensor([1, 2]).int() + 1, [2, 3])


def test_int_division_by_a_scalar_outside_the_dtype():
    # the scalar divides as it is: through uint8, -1 was 255 and 300 was 44
    u = Tensor(np.array([1, 2, 3], dtype=np.uint8))
    np.testing.assert_allclose((u / -1).numpy(), [-1.0, -2.0, -3.0])
    np.testing.assert_allclose((-1 / u).numpy(), [-1.0, -0.5, -1 / 3], rtol=1e-6)
    np.testing.assert_allclose((Tensor(np.array([3], dtype=np.int8)) / 300).numpy(), [0.01], rtol=1e-6)
    assert (u / -1).dtype == dtypes.float32


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_integer_powers_wrap_as_numpy(device):
    # the C backend's powf kept 24 bits: 3**39 in int64 lost its low digits, 65535**2 in uint16 was 0
    rng = np.random.default_rng(0)
    for nd in ["int8", "uint8", "int32", "uint32", "int64", "uint64"]:
        a = rng.integers(-5 if nd.startswith("int") else 0, 20, 12).astype(nd)
        e = rng.integers(0, 70, 12).astype(nd)
        np.testing.assert_array_equal((Tensor(a, device=device) ** Tensor(e, device=device)).numpy(), a ** e)
        np.testing.assert_array_equal((3 ** Tensor(e, device=device)).numpy(), np.array(3, dtype=nd) ** e)
    np.testing.assert_array_equal((Tensor(np.array([3], np.int64), device=device) ** 39).numpy(), [3 ** 39])
    np.testing.assert_array_equal((Tensor(np.array([65535], np.uint16), device=device) ** 2).numpy(), [1])
    np.testing.assert_array_equal((Tensor([5, 7], device=device) ** 0).numpy(), [1, 1])
    # a negative power element: the real power truncated, as the float pow cast back gave
    got = Tensor([1, -1, -1, 2], device=device) ** Tensor([-3, -3, -2, -1], device=device)
    np.testing.assert_array_equal(got.numpy(), [1, -1, 1, 0])


@pytest.mark.parametrize("dtype, tol", [(np.float32, 5e-7), (np.float64, 1e-15)])
def test_cos_and_tan_of_large_arguments(dtype, tol):
    # cos was sin(pi/2 - x): the subtraction dropped x's low bits, so float32 cos(1e6) was 0.9396
    # (numpy: 0.93675) and float64 cos(1e300) had the wrong sign
    x = np.concatenate([np.linspace(-20, 20, 2001), [1e6, -3e5, 12345.678, np.pi / 2],
                        [1e300, -1e200] if dtype == np.float64 else [1e30, -1e20]]).astype(dtype)
    np.testing.assert_allclose(Tensor(x).cos().numpy(), np.cos(x), rtol=0, atol=tol)
    far = np.delete(x[2001:], 3)  # not pi/2, where tan is a pole
    np.testing.assert_allclose(Tensor(far).tan().numpy(), np.tan(far), rtol=1e-4 if dtype == np.float32 else 1e-12)


def test_integer_to_a_negative_scalar_power_raises():
    with pytest.raises(ValueError, match=r"int32, shape \(2,\).*\(-1\)"):
        Tensor([2, 3]) ** -1


# ============================================================================ reductions

R = data(3, 4, 5)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2, (0, 2), (1, -1), (0, 1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name, ref, rtol", [
    ("sum", np.sum, 1e-5), ("max", np.max, 0), ("min", np.min, 0), ("mean", np.mean, 1e-5),
    ("var", lambda x, axis, keepdims: np.var(x, axis=axis, keepdims=keepdims, ddof=1), 1e-4),
    ("std", lambda x, axis, keepdims: np.std(x, axis=axis, keepdims=keepdims, ddof=1), 1e-4),
    ("prod", np.prod, 1e-5),
])
def test_reductions(name, ref, rtol, axis, keepdim):
    t = getattr(Tensor(R), name)(axis=axis, keepdim=keepdim)
    check(t, ref(R, axis=axis, keepdims=keepdim), rtol=rtol, atol=1e-5)
    assert_contract(t)


def test_reduce_axis_keeps_reduced_dims_then_reshapes():
    t = Tensor(R).sum(axis=1)
    assert t.uop.op is Ops.RESHAPE and t.uop.arg == (3, 5)
    red = t.uop.src[0]
    assert red.op is Ops.REDUCE_AXIS and red.arg == (Ops.ADD, (1,)) and red.shape == (3, 1, 5)
    k = Tensor(R).max(axis=(0, 2), keepdim=True)
    assert k.uop.op is Ops.REDUCE_AXIS and k.uop.arg == (Ops.MAX, (0, 2)) and k.shape == (1, 4, 1)


def test_reducing_size_one_axes_builds_no_reduce():
    t = Tensor(data(3, 1)).sum(axis=1)
    assert Ops.REDUCE_AXIS not in ops_in(t)
    check(t, t.lazy_numpy())
    assert Tensor(2.0).sum().shape == ()


@pytest.mark.parametrize("dt, out", [(np.int8, dtypes.int32), (np.uint8, dtypes.uint32), (np.int64, dtypes.int64),
                                     (np.bool_, dtypes.int32), (np.float16, dtypes.float16),
                                     (np.int32, dtypes.int32), (np.float64, dtypes.float64)])
def test_sum_dtypes(dt, out):
    x = (np.arange(12) % 5).reshape(3, 4).astype(dt)
    t = Tensor(x).sum(axis=0)
    assert t.dtype == out
    check(t, x.astype(np.int64).sum(axis=0) if dt != np.float16 else x.sum(axis=0), rtol=1e-3)
    assert Tensor(x).sum(dtype=dtypes.float32).dtype == dtypes.float32


def test_half_precision_sums_accumulate_in_float32():
    # a float16 accumulator stalls at 2048 (2048 + 1 rounds to 2048): the kernel summed 20000 values to 2048.0
    x = np.random.default_rng(0).random(20000).astype(np.float16)
    wide = x.astype(np.float64)
    t = Tensor(x)
    assert t.sum().dtype == t.mean().dtype == t.var().dtype == dtypes.float16
    got = [t.sum(), t.mean(), t.var(), Tensor(x.reshape(1, -1)) @ Tensor(np.ones((20000, 2), np.float16))]
    want = [wide.sum(), wide.mean(), wide.var(ddof=1), wide.sum() * np.ones((1, 2))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-3)
    # 100000 itself is inf in float16: the mean divides in float32
    assert Tensor(np.ones(100000, np.float16)).mean().numpy() == 1.0
    # n copies of one value sum to value * n (reduce_collapse.yaml), n taken in float32: in float16 70000
    # was inf, and 0 * inf NaN
    one = Tensor(np.zeros(1, np.float16)).expand(70000)
    assert one.sum(dtype=dtypes.float16).numpy() == 0
    np.testing.assert_allclose((one + 1e-4).sum(dtype=dtypes.float16).numpy(), 7.0, rtol=1e-3)


def test_mean_and_var_of_ints_are_float():
    x = np.arange(6).reshape(2, 3)
    assert Tensor(x).mean().dtype == dtypes.float32
    check(Tensor(x).mean(axis=1), x.mean(axis=1))
    check(Tensor(x).var(axis=0, correction=0), x.var(axis=0))
    assert Tensor(x).max().dtype == dtypes.int64


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(axis, keepdim):
    x = np.array([[1, 5, 5, 0], [7, 7, 2, 7], [0, 0, 0, 0]], np.float32)  # ties: the first index wins
    t = Tensor(x).argmax(axis=axis, keepdim=keepdim)
    assert t.dtype == dtypes.int32
    exp = np.argmax(x, axis=axis, keepdims=keepdim)  # axis=None, keepdim: shape (1, 1) as numpy
    check(t, exp)
    exp_min = np.argmin(x, axis=axis, keepdims=keepdim)
    check(Tensor(x).argmin(axis=axis, keepdim=keepdim), exp_min)
    check(Tensor(x.astype(np.int32)).argmin(axis=axis, keepdim=keepdim), exp_min)


def test_reduction_axis_errors():
    with pytest.raises(ValueError, match=r"axis 3 is out of range for shape \(3, 4, 5\)"):
        Tensor(R).sum(axis=3)
    with pytest.raises(ValueError, match=r"\(3, 4, 5\)"):
        Tensor(R).max(axis=-4)
    with pytest.raises(ValueError, match="repeated axis"):
        Tensor(R).sum(axis=(1, -2))
    with pytest.raises(ValueError, match=r"\(3, 4, 5\)"):
        Tensor(R).argmax(axis=5)


# ============================================================================ movement

M = data(4, 6)


@pytest.mark.parametrize("fn, ref", [
    (lambda t: t.reshape(6, 4), lambda x: x.reshape(6, 4)),
    (lambda t: t.reshape((2, -1, 3)), lambda x: x.reshape(2, -1, 3)),
    (lambda t: t.reshape(-1), lambda x: x.reshape(-1)),
    (lambda t: t.reshape(None, 2, 3), lambda x: x.reshape(4, 2, 3)),
    (lambda t: t.permute(1, 0), lambda x: x.transpose(1, 0)),
    (lambda t: t.reshape(2, 2, 6).permute((2, 0, 1)), lambda x: x.reshape(2, 2, 6).transpose(2, 0, 1)),
    (lambda t: t.reshape(2, 2, 6).permute(-1, 0, 1), lambda x: x.reshape(2, 2, 6).transpose(2, 0, 1)),
    (lambda t: t.reshape(4, 1, 6).expand(4, 3, 6), lambda x: np.broadcast_to(x.reshape(4, 1, 6), (4, 3, 6))),
    (lambda t: t.reshape(4, 1, 6).expand(-1, 3, -1), lambda x: np.broadcast_to(x.reshape(4, 1, 6), (4, 3, 6))),
    (lambda t: t.expand(2, 4, 6), lambda x: np.broadcast_to(x, (2, 4, 6))),
    (lambda t: t.pad(((1, 2), (0, 3))), lambda x: np.pad(x, ((1, 2), (0, 3)))),
    (lambda t: t.pad(((1, 2), None), value=-1.5), lambda x: np.pad(x, ((1, 2), (0, 0)), constant_values=-1.5)),
    (lambda t: t.pad((1, 2)), lambda x: np.pad(x, ((0, 0), (1, 2)))),
    (lambda t: t.pad(((-1, 2), (0, -3))), lambda x: np.pad(x[1:, :3], ((0, 2), (0, 0)))),
    (lambda t: t.shrink(((1, 3), (2, 6))), lambda x: x[1:3, 2:6]),
    (lambda t: t.shrink((None, (0, 1))), lambda x: x[:, 0:1]),
    (lambda t: t.flip(0), lambda x: x[::-1]),
    (lambda t: t.flip((0, 1)), lambda x: x[::-1, ::-1]),
    (lambda t: t.flip(-1), lambda x: x[:, ::-1]),
    (lambda t: t.transpose(), lambda x: x.T),
    (lambda t: t.T, lambda x: x.T),
    (lambda t: t.reshape(2, 2, 6).transpose(0, 2), lambda x: x.reshape(2, 2, 6).swapaxes(0, 2)),
    (lambda t: t.unsqueeze(0), lambda x: x[None]),
    (lambda t: t.unsqueeze(-1), lambda x: x[..., None]),
    (lambda t: t.unsqueeze(1), lambda x: x[:, None]),
    (lambda t: t.reshape(1, 4, 1, 6).squeeze(), lambda x: x),
    (lambda t: t.reshape(1, 4, 1, 6).squeeze(2), lambda x: x.reshape(1, 4, 6)),
    (lambda t: t.squeeze(0), lambda x: x),
    (lambda t: t.reshape(2, 2, 6).flatten(), lambda x: x.reshape(-1)),
    (lambda t: t.reshape(2, 2, 6).flatten(1), lambda x: x.reshape(2, 12)),
    (lambda t: t.reshape(2, 2, 2, 3).flatten(1, 2), lambda x: x.reshape(2, 4, 3)),
])
def test_movement(fn, ref):
    t = fn(Tensor(M))
    check(t, ref(M))
    assert_contract(t)


def test_pad_with_value_on_ints_and_bools():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = Tensor(x).pad(((1, 0), (0, 1)), value=9)
    assert t.dtype == dtypes.int32
    check(t, np.pad(x, ((1, 0), (0, 1)), constant_values=9))
    check(Tensor(np.array([False])).pad(((1, 1),), value=True), [True, False, True])


def test_noop_movement_builds_nothing():
    t = Tensor(M)
    assert t.reshape(4, 6) is t and t.permute(0, 1) is t and t.expand(4, 6) is t and t.flip(()) is t
    assert t.pad(((0, 0), (0, 0))) is t and t.shrink(((0, 4), (0, 6))) is t


@pytest.mark.parametrize("key, ref", [
    ((slice(1, 3), slice(2, 5)), lambda x: x[1:3, 2:5]), (2, lambda x: x[2]), (-1, lambda x: x[-1]),
    ((1, -2), lambda x: x[1, -2]), ((slice(None), 3), lambda x: x[:, 3]), ((Ellipsis, 0), lambda x: x[..., 0]),
    ((None, 1), lambda x: x[None, 1]), ((slice(-3, None),), lambda x: x[-3:]), (slice(3, 1), lambda x: x[3:1]),
    ((slice(0, 100), slice(-100, 2)), lambda x: x[0:100, -100:2]), ((0, None, slice(1, 2)), lambda x: x[0, None, 1:2]),
])
def test_indexing(key, ref):
    check(Tensor(M)[key], ref(M))


def test_indexing_errors():
    # (stepped slices and tensor indices work: tests/test_tensor_api_more.py)
    with pytest.raises(IndexError):
        Tensor(M)[4]
    with pytest.raises(IndexError):
        Tensor(M)[0, 0, 0]


def test_cat_and_stack():
    a, b, c = data(2, 3), data(2, 5), data(4, 3)
    check(Tensor(a).cat(Tensor(b), dim=1), np.concatenate([a, b], axis=1))
    check(Tensor(a).cat(Tensor(c)), np.concatenate([a, c]))
    check(Tensor.cat(Tensor(a), Tensor(c), Tensor(a), dim=-2), np.concatenate([a, c, a], axis=0))
    check(Tensor(a).cat(), a)
    i = Tensor([1, 2]).cat(Tensor([0.5]))
    assert i.dtype == dtypes.float32
    check(i, [1.0, 2.0, 0.5])
    check(Tensor.stack(Tensor(a), Tensor(a * 2), dim=0), np.stack([a, a * 2]))
    check(Tensor(a).stack(Tensor(a), Tensor(a), dim=2), np.stack([a, a, a], axis=2))
    check(Tensor(a).stack(Tensor(a), dim=-1), np.stack([a, a], axis=-1))
    with pytest.raises(ValueError, match=r"cannot cat \(2, 3\) with \(2, 5\)"):
        Tensor(a).cat(Tensor(b), dim=0)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 3\)"):
        Tensor(a).stack(Tensor(c))


@pytest.mark.parametrize("fn, pattern", [
    (lambda t: t.reshape(5, 5), r"cannot reshape \(4, 6\) to \(5, 5\)"),
    (lambda t: t.reshape(-1, 5), r"cannot reshape \(4, 6\)"),
    (lambda t: t.reshape(-1, -1), r"cannot reshape \(4, 6\)"),
    (lambda t: t.expand(4, 7), r"cannot expand \(4, 6\) to \(4, 7\)"),
    (lambda t: t.expand(6), r"cannot expand \(4, 6\)"),
    (lambda t: t.permute(0, 0), r"bad permutation \(0, 0\) for shape \(4, 6\)"),
    (lambda t: t.permute(0, 1, 2), r"bad permutation .* for shape \(4, 6\)"),
    (lambda t: t.permute(0, 2), r"bad permutation .* for shape \(4, 6\)"),
    (lambda t: t.shrink(((0, 5), (0, 6))), r"bad shrink .* for shape \(4, 6\)"),
    (lambda t: t.shrink(((0, 4),)), r"bad shrink .* for shape \(4, 6\)"),
    (lambda t: t.pad(((1, 1),)), r"bad padding .* for shape \(4, 6\)"),
    (lambda t: t.pad(((-3, -2), (0, 0))), r"bad padding .* for shape \(4, 6\)"),
    (lambda t: t.flip(2), r"axis 2 is out of range for shape \(4, 6\)"),
    (lambda t: t.transpose(0, 2), r"for shape \(4, 6\)"),
    (lambda t: t.unsqueeze(4), r"for shape \(4, 6\)"),
    (lambda t: t @ Tensor(data(5, 2)), r"cannot matmul \(4, 6\) with \(5, 2\)"),
    (lambda t: t.reshape(2, 2, 6) @ Tensor(data(3, 6, 2)), r"cannot matmul \(2, 2, 6\) with \(3, 6, 2\)"),
    (lambda t: t @ Tensor(2.0), r"cannot matmul \(4, 6\) with \(\)"),
    (lambda t: t.reshape(1, 1, 4, 6).conv2d(Tensor(data(2, 3, 3, 3))), r"\(1, 1, 4, 6\).*\(2, 3, 3, 3\)"),
    (lambda t: t.conv2d(Tensor(data(2, 3, 3, 3))), r"\(4, 6\)"),
    (lambda t: t.reshape(1, 1, 4, 6).conv2d(Tensor(data(2, 1, 3, 3)), stride=0), "stride"),
    (lambda t: t.reshape(1, 1, 4, 6).conv2d(Tensor(data(2, 1, 5, 3))), r"kernel \(5, 3\)"),
])
def test_errors_name_shapes(fn, pattern):
    with pytest.raises(ValueError, match=pattern):
        fn(Tensor(M))


# ============================================================================ composites


@pytest.mark.parametrize("sa, sb", [((4, 8), (8, 3)), ((2, 4, 8), (8, 3)), ((2, 4, 8), (2, 8, 3)),
                                    ((1, 4, 8), (3, 8, 2)), ((8,), (8, 3)), ((4, 8), (8,)), ((8,), (8,)),
                                    ((5, 1, 3, 4), (2, 4, 6))])
def test_matmul(sa, sb):
    a, b = data(*sa), data(*sb)
    t = Tensor(a) @ Tensor(b)
    check(t, a @ b, rtol=1e-5, atol=1e-5)
    check(Tensor(a).dot(Tensor(b)), a @ b, rtol=1e-5, atol=1e-5)
    check(Tensor(a).matmul(Tensor(b)), a @ b, rtol=1e-5, atol=1e-5)
    assert_contract(t)
    assert sum(u.op is Ops.REDUCE_AXIS for u in t.uop.toposort()) == 1


def test_matmul_ints_and_reflected():
    a, b = np.arange(6).reshape(2, 3).astype(np.int32), np.arange(12).reshape(3, 4).astype(np.int8)
    t = Tensor(a) @ Tensor(b)
    assert t.dtype == dtypes.int32
    check(t, a @ b)
    check(a.astype(np.float32) @ Tensor(b.astype(np.float32)), a @ b)


def test_linear_and_sequential():
    x, w, bias = data(2, 3), data(3, 4), data(4)
    check(Tensor(x).linear(Tensor(w), Tensor(bias)), x @ w + bias, atol=1e-5)
    check(Tensor(x).linear(Tensor(x[0])), x * x[0])
    check(Tensor(x).sequential([lambda t: t * 2, Tensor.relu]), np.maximum(x * 2, 0))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_log_softmax(axis):
    x = data(3, 5) * 4
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    sm = e / e.sum(axis=axis, keepdims=True)
    check(Tensor(x).softmax(axis), sm, rtol=1e-5)
    check(Tensor(x).log_softmax(axis), np.log(sm), rtol=1e-5, atol=1e-5)
    check(Tensor(np.array([1, 2, 3])).softmax(), np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum(), rtol=1e-5)


@pytest.mark.parametrize("axis", [-1, 0, (0, 1)])
def test_layernorm(axis):
    x = data(4, 16)
    mu = x.mean(axis=axis, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axis, keepdims=True) + 1e-5)
    check(Tensor(x).layernorm(axis), ref, rtol=1e-4, atol=1e-5)
    check(Tensor(x).layernorm(axis, eps=0.5), (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axis, keepdims=True) + 0.5),
          rtol=1e-4, atol=1e-5)


def conv2d_ref(x, w, bias=None, stride=(1, 1), pads=((0, 0), (0, 0)), groups=1, dilation=(1, 1)):
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pads)).astype(np.float64)
    n, _, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    dh, dw = dilation
    oh, ow = (h - dh * (kh - 1) - 1) // stride[0] + 1, (wd - dw * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, cout, oh, ow))
    per_group = cout // groups
    for co in range(cout):
        g = co // per_group
        for i in range(oh):
            for j in range(ow):
                r, c = i * stride[0], j * stride[1]
                win = x[:, g * cin_g:(g + 1) * cin_g, r:r + dh * (kh - 1) + 1:dh, c:c + dw * (kw - 1) + 1:dw]
                out[:, co, i, j] = (win * w[co]).sum(axis=(1, 2, 3))
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("xs, ws, kw, ref_kw", [
    ((1, 2, 6, 6), (3, 2, 3, 3), {}, {}),
    ((2, 3, 7, 5), (4, 3, 2, 3), {"stride": 2}, {"stride": (2, 2)}),
    ((1, 2, 6, 6), (3, 2, 3, 3), {"padding": 1}, {"pads": ((1, 1), (1, 1))}),
    ((1, 1, 9, 9), (2, 1, 2, 2), {"stride": (4, 3), "padding": (1, 0)}, {"stride": (4, 3), "pads": ((1, 1), (0, 0))}),
    ((1, 2, 5, 5), (2, 2, 1, 1), {"stride": 3}, {"stride": (3, 3)}),
    ((1, 2, 5, 6), (2, 2, 3, 3), {"padding": (1, 2, 0, 1)}, {"pads": ((0, 1), (1, 2))}),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2}, {"groups": 2}),
    ((1, 1, 3, 3), (1, 1, 3, 3), {}, {}),
    ((1, 2, 9, 8), (3, 2, 3, 2), {"dilation": 2}, {"dilation": (2, 2)}),
    ((2, 4, 9, 10), (6, 2, 3, 2), {"groups": 2, "stride": (1, 2), "dilation": (2, 3), "padding": 1},
     {"groups": 2, "stride": (1, 2), "dilation": (2, 3), "pads": ((1, 1), (1, 1))}),
])
def test_conv2d(xs, ws, kw, ref_kw):
    x, w, b = data(*xs), data(*ws), data(ws[0])
    t = Tensor(x).conv2d(Tensor(w), **kw)
    check(t, conv2d_ref(x, w, **ref_kw), rtol=1e-4, atol=1e-5)
    assert sum(u.op is Ops.REDUCE_AXIS for u in t.uop.toposort()) == 1  # one reduction
    assert_contract(t)
    check(Tensor(x).conv2d(Tensor(w), Tensor(b), **kw), conv2d_ref(x, w, b, **ref_kw), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel, stride, size", [((3,), (1,), 7), ((2,), (2,), 7), ((1,), (5,), 7), ((4,), (3,), 10),
                                                  ((7,), (1,), 7), ((2, 3), (3, 1), 8)])
def test_pool_windows(kernel, stride, size):
    x = data(2, *(size,) * len(kernel))
    t = Tensor(x)._pool(kernel, stride)
    outs = [(size - k) // s + 1 for k, s in zip(kernel, stride)]
    assert t.shape == (2, *outs, *kernel)
    got = t.lazy_numpy()
    for idx in np.ndindex(*outs, *kernel):
        o, k = idx[:len(kernel)], idx[len(kernel):]
        src = tuple(oo * s + kk for oo, kk, s in zip(o, k, stride))
        np.testing.assert_array_equal(got[(slice(None), *idx)], x[(slice(None), *src)])
    assert Ops.REDUCE_AXIS not in ops_in(t)


@pytest.mark.parametrize("shape, axis", [((6,), 0), ((4, 5), 0), ((4, 5), 1), ((2, 3, 4), -1), ((2, 3, 4), 1)])
def test_cumsum(shape, axis):
    x = data(*shape)
    t = Tensor(x).cumsum(axis)
    check(t, np.cumsum(x, axis=axis), rtol=1e-5, atol=1e-5)
    assert sum(u.op is Ops.REDUCE_AXIS for u in t.uop.toposort()) == 1
    i = np.arange(10, dtype=np.int8)
    assert Tensor(i).cumsum().dtype == dtypes.int32
    check(Tensor(i).cumsum(), np.cumsum(i))


# ============================================================================ realization API


@pytest.fixture
def fake_realize(monkeypatch):
    calls = []
    mod = types.ModuleType("rulec.runtime.tensor.realize")
    mod.realize = lambda *ts: calls.append(("realize", ts))
    mod.schedule = lambda *ts: calls.append(("schedule", ts)) or ["kernel"]
    mod.to_numpy = lambda t: calls.append(("to_numpy", (t,))) or t.lazy_numpy()
    monkeypatch.setitem(sys.modules, "rulec.runtime.tensor.realize", mod)
    return calls


def test_realize_api_delegates(fake_realize):
    a, b = Tensor([1.0, 2.0]), Tensor([[3, 4]])
    assert a.realize() is a
    assert Tensor.realize(a, b) is a
    assert Tensor.schedule(a, b) == ["kernel"]
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])
    assert b.tolist() == [[3, 4]]
    assert Tensor([5.0]).item() == 5.0
    assert [c[0] for c in fake_realize] == ["realize", "realize", "schedule", "to_numpy", "to_numpy", "to_numpy"]
    assert fake_realize[1][1] == (a, b) and fake_realize[2][1] == (a, b)
    with pytest.raises(ValueError, match="one element"):
        a.item()


def test_contiguous_and_assign():
    a = Tensor(data(2, 3))
    assert a.contiguous().uop is a.uop  # a buffer already is contiguous (tinygrad 0.14: the same storage)
    c = (a + 1).contiguous()
    assert c.uop.op is Ops.CONTIGUOUS and c.uop.src[0] is (a + 1).uop and c.shape == (2, 3)
    target = Tensor.empty(2, 3)
    old = target.uop
    value = Tensor(data(2, 3))
    assert target.assign(value) is target
    assert target.uop.op is Ops.ASSIGN and target.uop.src == (old, value.uop)
    check(target, value.lazy_numpy())
    t2 = Tensor.empty(2, 3)
    t2.assign(1.5)
    check(t2, np.full((2, 3), 1.5))
    t3 = Tensor.empty(2, dtype=dtypes.int32)
    t3.assign([4, 5])
    check(t3, [4, 5])
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        Tensor.empty(2, 3).assign(Tensor(data(3, 2)))
    with pytest.raises(ValueError, match="int32"):
        Tensor.empty(2, 3).assign(Tensor(np.zeros((2, 3), np.int32)))


def test_facts_and_repr():
    t = Tensor(data(2, 3, 4))
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24 and len(t) == 2 and t.device == "CPU"
    assert repr(t) == "<Tensor shape=(2, 3, 4) dtype=float32 op=RESHAPE>"
    assert Tensor(1.0).numel() == 1 and Tensor(1.0).ndim == 0
    with pytest.raises(TypeError):
        len(Tensor(1.0))


# ============================================================================ reference programs


def _ref_programs():
    a44, b44, c44 = data(4, 4), data(4, 4), data(4, 4)
    a1024 = data(32, 32)
    a8 = data(8, 8)
    col, row = data(8, 1), data(1, 8)
    xc, wc = data(1, 2, 6, 6), data(3, 2, 3, 3)
    x, w1, w2 = data(4, 8), data(8, 16), data(16, 3)
    a23, b25 = data(2, 3), data(2, 5)
    T = Tensor
    e = np.exp(a44 - a44.max(axis=0, keepdims=True))
    ln = (a8 - a8.mean(-1, keepdims=True)) / np.sqrt(a8.var(-1, keepdims=True) + 1e-5)
    return {
        "a*b+c": (lambda: T(a44) * T(b44) + T(c44), a44 * b44 + c44),
        "(a-b).abs().sum(0)": (lambda: (T(a44) - T(b44)).abs().sum(0), np.abs(a44 - b44).sum(0)),
        "a.sum()": (lambda: T(a44).sum(), a44.sum()),
        "a.max(axis=1)": (lambda: T(a44).max(axis=1), a44.max(axis=1)),
        "a@b": (lambda: T(x) @ T(w1), x @ w1),
        "a.softmax(axis=0)": (lambda: T(a44).softmax(axis=0), e / e.sum(axis=0, keepdims=True)),
        "a.layernorm()": (lambda: T(a8).layernorm(), ln),
        "a.reshape(8,128).permute(1,0).contiguous()": (
            lambda: T(a1024).reshape(8, 128).permute(1, 0).contiguous(), a1024.reshape(8, 128).T),
        "a.pad(((2,0),(0,3)))*2": (lambda: T(a44).pad(((2, 0), (0, 3))) * 2, np.pad(a44, ((2, 0), (0, 3))) * 2),
        "a.shrink(((2,6),(0,4))).sum()": (lambda: T(a8).shrink(((2, 6), (0, 4))).sum(), a8[2:6, 0:4].sum()),
        "a.flip(1).contiguous()": (lambda: T(a44).flip(1).contiguous(), a44[:, ::-1]),
        "a[8,1]*b[1,8]": (lambda: T(col) * T(row), col * row),
        "a - a.mean(axis=1, keepdim=True)": (lambda: T(a44) - T(a44).mean(axis=1, keepdim=True),
                                             a44 - a44.mean(axis=1, keepdims=True)),
        "conv2d": (lambda: T(xc).conv2d(T(wc)), conv2d_ref(xc, wc)),
        "a.cumsum(0)": (lambda: T(a44).cumsum(0), np.cumsum(a44, 0)),
        "a.argmax(axis=1)": (lambda: T(a44).argmax(axis=1), a44.argmax(axis=1)),
        "(a>b).where(a,b)": (lambda: (T(a44) > T(b44)).where(T(a44), T(b44)), np.where(a44 > b44, a44, b44)),
        "a.int()+1": (lambda: T(a44 * 10).int() + 1, (a44 * 10).astype(np.int32) + 1),
        "a+a.T": (lambda: T(a44) + T(a44).T, a44 + a44.T),
        "(x@w1).relu()@w2": (lambda: (T(x) @ T(w1)).relu() @ T(w2), np.maximum(x @ w1, 0) @ w2),
        "a.cat(b, dim=1)": (lambda: T(a23).cat(T(b25), dim=1), np.concatenate([a23, b25], 1)),
        "Tensor.full((4,4),3.0).contiguous()": (lambda: T.full((4, 4), 3.0).contiguous(), np.full((4, 4), 3.0)),
        "Tensor.arange(16).reshape(4,4).sum(1)": (lambda: T.arange(16).reshape(4, 4).sum(1),
                                                  np.arange(16).reshape(4, 4).sum(1)),
        "a.exp().sum(1).log()": (lambda: T(a44).exp().sum(1).log(), np.log(np.exp(a44).sum(1))),
        "a.reshape(2,4,8).permute(2,0,1).sum(2)": (lambda: T(a8).reshape(2, 4, 8).permute(2, 0, 1).sum(2),
                                                   a8.reshape(2, 4, 8).transpose(2, 0, 1).sum(2)),
    }


REF_PROGRAMS = _ref_programs()


@pytest.mark.parametrize("name", list(REF_PROGRAMS))
def test_reference_program(name):
    build, expected = REF_PROGRAMS[name]
    t = build()
    check(t, expected, rtol=1e-4, atol=1e-5)
    assert_contract(t)


# ============================================================================ property test


def _random_shape(draw, numel: int) -> tuple[int, ...]:
    """A random shape of `numel` elements: its prime factors dealt out to 1-3 axes, plus maybe a 1."""
    factors, n, p = [], numel, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    ndim = draw(st.integers(1, 3))
    dims = [1] * ndim
    for f in factors:
        dims[draw(st.integers(0, ndim - 1))] *= f
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, ndim)), 1)
    return tuple(dims)


def _step(draw, t: Tensor, x: np.ndarray) -> tuple[Tensor, np.ndarray]:
    kind = draw(st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip", "unary", "binary",
                                 "reduce", "index"]))
    nd = x.ndim
    if kind == "reshape":
        shape = _random_shape(draw, x.size)
        return t.reshape(shape), x.reshape(shape)
    if kind == "permute":
        order = tuple(draw(st.permutations(range(nd))))
        return t.permute(order), x.transpose(order)
    if kind == "expand" and x.size * 3 <= 512:
        ax, n = draw(st.integers(0, nd)), draw(st.integers(1, 3))
        shape = x.shape[:ax] + (n,) + x.shape[ax:]
        return t.unsqueeze(ax).expand(shape), np.broadcast_to(np.expand_dims(x, ax), shape)
    if kind == "pad" and x.size * 4 <= 512:
        pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(nd))
        value = draw(st.sampled_from([0.0, 1.5]))
        return t.pad(pads, value=value), np.pad(x, pads, constant_values=value)
    if kind == "shrink":
        arg = []
        for s in x.shape:
            b = draw(st.integers(0, s - 1))
            arg.append((b, draw(st.integers(b + 1, s))))
        return t.shrink(tuple(arg)), x[tuple(slice(b, e) for b, e in arg)]
    if kind == "flip":
        axes = tuple(sorted(set(draw(st.lists(st.integers(0, nd - 1), max_size=nd)))))
        return t.flip(axes), np.flip(x, axes) if axes else x
    if kind == "unary":
        name = draw(st.sampled_from(["neg", "abs", "relu", "sin", "affine", "maximum", "square"]))
        fns = {"neg": (Tensor.neg, np.negative), "abs": (Tensor.abs, np.abs),
               "relu": (Tensor.relu, lambda v: np.maximum(v, 0)), "sin": (Tensor.sin, np.sin),
               "affine": (lambda v: v * 0.5 + 1, lambda v: v * np.float32(0.5) + np.float32(1)),
               "maximum": (lambda v: v.maximum(0.25), lambda v: np.maximum(v, np.float32(0.25))),
               "square": (Tensor.square, np.square)}
        f, g = fns[name]
        return f(t), g(x)
    if kind == "binary":
        # with a permuted / flipped copy of itself: two views of one buffer
        order = tuple(draw(st.permutations(range(nd))))
        other_t, other_x = t.permute(order).flip(0), np.flip(x.transpose(order), 0)
        if other_x.shape != x.shape:
            other_t, other_x = t.flip(0), np.flip(x, 0)
        return t + other_t * 2, x + other_x * np.float32(2)
    if kind == "reduce" and nd >= 2:
        ax, keep = draw(st.integers(-nd, nd - 1)), draw(st.booleans())
        op = draw(st.sampled_from(["sum", "max", "min"]))
        return getattr(t, op)(axis=ax, keepdim=keep), getattr(np, op)(x, axis=ax, keepdims=keep)
    if kind == "index":
        ax = draw(st.integers(0, nd - 1))
        s = x.shape[ax]
        b = draw(st.integers(-s, s - 1))
        key = (slice(None),) * ax + (slice(b, None),)
        return t[key], x[key]
    return t, x


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_chains_match_numpy(hdata):
    numel = hdata.draw(st.sampled_from([1, 2, 6, 8, 12, 24, 30]))
    shape = _random_shape(hdata.draw, numel)
    x = (np.arange(numel, dtype=np.float32) * 0.37 - 3.1).reshape(shape)
    t = Tensor(x)
    for _ in range(hdata.draw(st.integers(1, 7))):
        t, x = _step(hdata.draw, t, x)
    check(t, x, rtol=1e-5, atol=1e-5)
    assert_contract(t)


def test_tensors_of_no_elements():
    """Nothing to compute: no kernel, and numpy() gives an empty array of the right shape and dtype."""
    a = Tensor(np.zeros((0, 3), np.float32))
    for t in (a + 1, a.sum(1), Tensor.arange(0), a.reshape(3, 0).permute(1, 0)):
        assert 0 in t.shape and Tensor.schedule(t) == []
        got = t.numpy()
        assert got.shape == t.shape and got.dtype == buffers.numpy_dtype(t.dtype)
    np.testing.assert_array_equal(a.cat(Tensor(np.ones((2, 3), np.float32))).numpy(), np.ones((2, 3)))


def test_reduce_over_no_elements_is_its_identity():
    a = Tensor(np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(a.sum(0).numpy(), np.zeros(3))
    np.testing.assert_array_equal(a.max(0).numpy(), np.full(3, -np.inf))
    np.testing.assert_array_equal(a.sum(0, keepdim=True).numpy(), np.zeros((1, 3)))
    assert Tensor.schedule(a.sum(0)) == []  # a constant
    assert Tensor.arange(0).sum().device is None and Tensor.arange(0).sum().numpy() == 0


# ------------------------------------------------------------------ tinygrad's signatures


def test_conv2d_positional_arguments_in_tinygrad_order():
    # tinygrad 0.14: conv2d(weight, bias, groups, stride, dilation, padding, dtype)
    x, w = data(1, 4, 9, 10), data(6, 2, 3, 2)
    t = Tensor(x).conv2d(Tensor(w), None, 2, 1, 2, 1)
    check(t, conv2d_ref(x, w, groups=2, dilation=(2, 2), pads=((1, 1), (1, 1))), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode, np_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes(mode, np_mode):
    x = data(3, 4)
    pads = ((1, 2), (2, 0))
    check(Tensor(x).pad(pads, mode), np.pad(x, pads, mode=np_mode))
    check(Tensor(x).pad((0, 3, 2, 1), mode=mode), np.pad(x, ((2, 1), (0, 3)), mode=np_mode))
    with pytest.raises(ValueError, match=mode):  # past the other edge; replicate: nothing to copy from
        Tensor(x).pad(((4, 0), (0, 0)), mode) if mode != "replicate" else Tensor(x[:0]).pad(((1, 0), (0, 0)), mode)
    with pytest.raises(ValueError, match="pad mode"):
        Tensor(x).pad(pads, "mirror")


def test_pad_value_promotes_like_an_operand():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = Tensor(x).pad(((1, 0), (0, 1)), value=2.5)
    assert t.dtype == dtypes.float32
    check(t, np.pad(x.astype(np.float32), ((1, 0), (0, 1)), constant_values=2.5))
    assert Tensor(x).pad(((1, 0), (0, 1))).dtype == dtypes.int32  # the default 0.0 keeps the dtype
    assert Tensor(x).pad(((1, 0), (0, 1)), "constant", 7).dtype == dtypes.int32


def test_dtype_names():
    assert Tensor([1.5, 2.5]).cast("int32").dtype == dtypes.int32
    assert Tensor.zeros(3, dtype="int8").dtype == dtypes.int8
    assert Tensor([1, 2], dtype="float16").dtype == dtypes.float16
    assert Tensor.arange(4, dtype="float").dtype == dtypes.float32
    assert Tensor([1, 2]).sum(dtype="int64").dtype == dtypes.int64
    with pytest.raises(ValueError, match="unknown dtype 'int33'"):
        Tensor([1]).cast("int33")
    with pytest.raises(TypeError, match="dtype"):
        Tensor([1]).cast(3)


def test_device_argument():
    assert Tensor([1, 2], "CPU").device == "CPU"
    assert Tensor.ones(2, device="cpu").device == "CPU"
    assert Tensor([1, 2], device="cuda:0").device == "CUDA"  # placed there; running it needs a GPU
    with pytest.raises(ValueError, match="unknown device 'TPU'"):
        Tensor([1, 2], device="TPU")


def test_gelu_exact_and_erf():
    x = np.linspace(-4, 4, 33).astype(np.float32)
    erf = np.vectorize(math.erf)
    check(Tensor(x).erf(), erf(x), atol=2e-7)
    check(Tensor(x).gelu(approximate="none"), 0.5 * x * (1 + erf(x / math.sqrt(2))), atol=1e-6)
    check(Tensor(x).gelu(), 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), atol=1e-6)
    with pytest.raises(ValueError, match="approximate"):
        Tensor(x).gelu("fast")
    check(Tensor(np.array([-2.0, 0.0, 3.0], np.float32)).sign(), [-1.0, 0.0, 1.0])
    # numpy's sign of NaN is NaN (it was 0); of +-inf, +-1
    special = np.array([np.nan, -np.inf, np.inf, -0.0], np.float32)
    np.testing.assert_array_equal(Tensor(special).sign().numpy(), np.sign(special))


def test_dtype_arguments_of_composites():
    a = np.array([[100, 100], [50, -100]], np.int8)
    b = np.array([[2, 1], [3, 1]], np.int8)
    t = Tensor(a).matmul(Tensor(b), dtype=dtypes.int32)
    assert t.dtype == dtypes.int32
    check(t, a.astype(np.int32) @ b.astype(np.int32))
    check(Tensor(b).matmul(Tensor(a), reverse=True, dtype="int32"), a.astype(np.int32) @ b.astype(np.int32))
    check(Tensor(a).dot(Tensor(b), dtype="int32"), a.astype(np.int32) @ b.astype(np.int32))
    s = Tensor(np.array([1.0, 2.0], np.float32)).softmax(dtype=dtypes.float16)
    assert s.dtype == dtypes.float16
    assert Tensor(np.array([1.0, 2.0], np.float32)).log_softmax(dtype="float16").dtype == dtypes.float16
