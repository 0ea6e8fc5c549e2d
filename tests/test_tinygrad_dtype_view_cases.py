"""Weak tensors (tinygrad 0.14's weakint / weakfloat) in the style of tinygrad's test_dtype_weak: a tensor
made from a Python scalar promotes as the scalar would. The programs are our own; numpy computes every
expected value (a Python scalar in numpy 2 is weak too)."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, dtypes


# ------------------------------------------------------------------ a scalar tensor takes its partner's dtype

def test_int_scalar_tensor_wraps_in_an_int8_partner():
    # Tensor(100) stands for the Python int 100: the sum is int8 and wraps, as 100 + int8 does in numpy
    x = np.array([100, -100], np.int8)
    got = Tensor(100) + Tensor(x)
    assert got.dtype == dtypes.int8
    np.testing.assert_array_equal(got.numpy(), np.int8(100) + x)


def test_int_scalar_tensor_times_int8_and_uint8_minimum():
    x = np.array([100, 3], np.int8)
    np.testing.assert_array_equal((Tensor(x) * Tensor(3)).numpy(), x * 3)
    m = Tensor(1).minimum(Tensor([2], dtype=dtypes.uint8))
    assert m.dtype == dtypes.uint8 and m.tolist() == [1]
    p = Tensor(2) ** Tensor([3, 4], dtype=dtypes.uint8)
    assert p.dtype == dtypes.uint8 and p.tolist() == [8, 16]


def test_weak_operands_stay_weak_through_a_chain():
    # (3 * 2 + 1) is computed from weak operands only: it is still weak when it meets int16
    got = (Tensor(3) * 2 + 1) + Tensor([1, 2], dtype=dtypes.int16)
    assert got.dtype == dtypes.int16 and got.tolist() == [8, 9]
    # a where of weak values, a reshape and a contiguous keep it weak too
    w = Tensor([True, False]).where(Tensor(1), 2).reshape(2).contiguous()
    d = w.dot(Tensor([1, 1], dtype=dtypes.int8))
    assert d.dtype == dtypes.int8 and d.item() == 3


def test_stack_and_cat_of_weak_parts():
    s = Tensor.stack(Tensor(1), Tensor(2)) + Tensor([1, 1], dtype=dtypes.int8)
    assert s.dtype == dtypes.int8 and s.tolist() == [2, 3]
    c = Tensor(1).reshape(1).cat(Tensor([5], dtype=dtypes.int8))
    assert c.dtype == dtypes.int8 and c.tolist() == [1, 5]


# ------------------------------------------------------------------ weak floats

def test_float_of_a_weak_int_is_weak():
    f16 = Tensor([1.0], dtype=dtypes.float16)
    for out in (Tensor(2).exp(), Tensor(2).cos(), Tensor(2).sigmoid(), Tensor(4).sqrt()):
        assert out.dtype == dtypes.float32 and (out + f16).dtype == dtypes.float16
    np.testing.assert_allclose((Tensor(2).exp() + f16).numpy(), np.float16(np.exp(2) + 1), rtol=1e-3)


def test_int8_times_a_float_scalar_is_a_weak_float():
    # int8 * 0.5 brings the float kind from the scalar: float16 wins over it afterwards (tinygrad's)
    x = Tensor([1, 2], dtype=dtypes.int8)
    half = Tensor([1.0, 3.0], dtype=dtypes.float16)
    got = (x + 0.5) + half
    assert (x + 0.5).dtype == dtypes.float32 and got.dtype == dtypes.float16
    np.testing.assert_array_equal(got.numpy(), np.array([2.5, 5.5], np.float16))
    # a float tensor is not weak: float32 stays float32
    assert (x.float() * 2 + half).dtype == dtypes.float32


# ------------------------------------------------------------------ what commits a weak tensor

@pytest.mark.parametrize("commit", [
    lambda t: t.cast(dtypes.int32), lambda t: t.expand(3).sum(), lambda t: t.clone(),
    lambda t: Tensor(3, dtype=dtypes.int32),
])
def test_cast_reduce_clone_and_an_explicit_dtype_commit(commit):
    got = commit(Tensor(3)) + Tensor([1], dtype=dtypes.int8)
    assert got.dtype == dtypes.int32


def test_bool_scalar_tensor_is_not_weak():
    got = Tensor(True) + Tensor([1], dtype=dtypes.int8)
    assert got.dtype == dtypes.int8  # bool promotes to the int anyway
    assert (Tensor(True) + 1).dtype == dtypes.int32


def test_assign_a_weak_value_takes_the_target_dtype():
    dst = Tensor.zeros(2, dtype=dtypes.int8).contiguous().realize()
    dst.assign(Tensor(3).reshape(1).expand(2))
    assert dst.dtype == dtypes.int8 and dst.tolist() == [3, 3]
    fdst = Tensor.zeros(2, dtype=dtypes.float32).contiguous().realize()
    fdst[0:1] = Tensor(0.5).reshape(1)
    assert fdst.tolist() == [0.5, 0.0]
    with pytest.raises(ValueError, match="float32.*int8"):  # a weak float does not defer to an int
        dst.assign(Tensor(0.5).reshape(1).expand(2))


def test_assign_into_a_weak_tensor_commits_it():
    t = Tensor(0.5).contiguous().realize()
    t.assign(Tensor(1.0, dtype=dtypes.float32))
    assert (t + Tensor([1], dtype=dtypes.float16)).dtype == dtypes.float32
    assert t.item() == 1.0


# ------------------------------------------------------------------ tinygrad.dtype.to_dtype

def test_to_dtype_is_served_by_the_compat_layer():
    import rulec.compat

    with rulec.compat.tinygrad_layer():
        from tinygrad.dtype import to_dtype
        assert to_dtype("int32") == dtypes.int32 and to_dtype(dtypes.float16) == dtypes.float16


def test_a_weak_int_compares_at_its_own_width():
    # promoting would wrap 300 into uint8 (44); a comparison must see 300, as numpy does for the Python int
    x = np.array([2, 250], np.uint8)
    np.testing.assert_array_equal((Tensor(300) > Tensor(x)).numpy(), 300 > x)
    np.testing.assert_array_equal((Tensor(x) < Tensor(300)).numpy(), x < 300)
    np.testing.assert_array_equal((Tensor(-1) == Tensor(x)).numpy(), x == -1)


# ------------------------------------------------------------------ a scalar tensor keeps its exact value

def test_a_big_int_scalar_tensor_is_not_wrapped():
    # 2**40 does not fit int32: as Python data does, it is stored as int64 (it was wrapped to 0)
    assert Tensor(2**40).item() == 2**40
    x = Tensor.full((1,), 1, dtype=dtypes.int64)
    assert (x + Tensor(2**40)).tolist() == [2**40 + 1]
    assert (Tensor(-2**40) + x).tolist() == [-2**40 + 1]


def test_a_float_scalar_tensor_meets_float64_at_full_precision():
    # the scalar is rounded to its partner's dtype, not through float32 first
    v = 1.0 + 2**-40
    x64 = Tensor.full((1,), 1.0, dtype=dtypes.float64)
    assert (x64 + Tensor(v)).item() == 2.0 + 2**-40
    assert (Tensor.full((1,), 0.0, dtype=dtypes.float32) + Tensor(v)).item() == 1.0
    assert Tensor(v).dtype == dtypes.float32  # on its own it is stored as float32, as tinygrad's


# ------------------------------------------------------------------ one variable bound twice (test_stunning)

def test_a_variable_bound_to_two_values_is_tinygrads_runtime_error():
    from rulec.runtime.ir.uop import UOp

    a = Tensor.arange(40).reshape(4, 10).contiguous()
    i = UOp.variable("i", 0, 3)
    assert a[i.bind(2)].tolist() == list(range(20, 30))
    with pytest.raises(RuntimeError, match="bind mismatch on i"):  # a ValueError too
        a[i.bind(1)].cat(a[i.bind(3)]).tolist()


def test_setitem_of_a_weak_value_takes_the_target_dtype():
    dst = Tensor.zeros(3, dtype=dtypes.int8).contiguous().realize()
    dst[1:3] = Tensor(300).reshape(1)  # wraps into int8 as the Python int 300 would: 44
    assert dst.tolist() == [0, 44, 44]
    with pytest.raises(ValueError, match="float32.*int8"):
        dst[0:1] = Tensor(0.5).reshape(1)


def test_a_reduction_over_nothing_is_not_weak():
    empty = Tensor.arange(4)[:0] * 2  # no storage, no elements
    assert (empty.sum() + Tensor([1], dtype=dtypes.int8)).dtype == dtypes.int32


def test_assign_and_cat_take_a_weak_float_at_full_precision():
    v = 1.0 + 2**-40
    dst = Tensor.zeros(2, dtype=dtypes.float64).contiguous().realize()
    dst.assign(Tensor(v).reshape(1).expand(2))
    assert dst.tolist() == [v, v]
    c = Tensor(v).reshape(1).cat(Tensor([1.0], dtype=dtypes.float64))
    assert c.tolist() == [v, 1.0]
