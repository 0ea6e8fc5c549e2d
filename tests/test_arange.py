"""The lazy arange: no device, no buffer, fused into its consumers; affine integer sums fold.

`Tensor.arange` is IOTA cast, scaled and shifted (docs/tensor-ir.md). Like tinygrad 0.14's, it has no
device: realizing a tensor computed only from aranges and Python scalars stores nothing, and `numpy()`
computes it with one kernel. The reduce_collapse rules (rules/schedule/reduce_collapse.yaml) turn an integer
sum of an affine function of the loop range into closed-form arithmetic.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulec import Tensor, dtypes
from rulec.runtime.tensor import realize as realize_mod
from rulec.runtime.ir.ops import Ops


@pytest.fixture
def ran(monkeypatch):
    """The schedule items run from here on, in order."""
    items = []
    original = realize_mod.run_item

    def counting(item, *args, **kw):
        items.append(item)
        return original(item, *args, **kw)

    monkeypatch.setattr(realize_mod, "run_item", counting)
    return items


def realized(a: np.ndarray) -> Tensor:
    t = Tensor(a)
    t.realize()
    return t


def has_reduce(item) -> bool:
    return any(u.op is Ops.REDUCE for u in item.ast.toposort())


def test_arange_is_a_lazy_graph_without_device():
    t = Tensor.arange(2, 20, 3)
    ops = {u.op for u in t.uop.toposort()}
    assert Ops.IOTA in ops and Ops.BUFFER not in ops
    assert t.device is None
    np.testing.assert_array_equal(t.numpy(), np.arange(2, 20, 3))


def test_realizing_a_tensor_without_device_stores_nothing(ran):
    t = Tensor.arange(16).reshape(4, 4).sum(1)
    before = t.uop
    assert Tensor.schedule(t) == []
    t.realize()
    assert t.uop is before and ran == []
    # reading it back computes it: one kernel, and the sum folded away (no reduce loop)
    np.testing.assert_array_equal(t.numpy(), np.arange(16).reshape(4, 4).sum(1))
    assert len(ran) == 1 and not has_reduce(ran[0])
    assert t.uop is before


def test_contiguous_does_not_give_a_device():
    # as in tinygrad 0.14: there is still no device to store it on
    assert Tensor.schedule(Tensor.arange(16).contiguous()) == []


def test_python_scalars_keep_it_without_device():
    t = Tensor.arange(8) * 2 + 1
    assert t.device is None
    np.testing.assert_array_equal(t.numpy(), np.arange(8) * 2 + 1)


def test_user_constants_have_a_device():
    for t in (Tensor.ones(16).cumsum(), Tensor.full((4,), 2) + Tensor.arange(4)):
        assert t.device == "CPU"
        assert len(Tensor.schedule(t)) == 1
    np.testing.assert_array_equal(Tensor.ones(16).cumsum().numpy(), np.arange(1, 17))


def test_arange_fuses_into_its_consumer():
    a = realized(np.ones(8, np.float32))
    out = a + Tensor.arange(8)
    [item] = Tensor.schedule(out)
    assert len(item.buffers) == 2  # the output and `a`: the arange is computed in place, not loaded
    np.testing.assert_array_equal(out.numpy(), np.arange(8) + 1.0)


def test_padded_arange_reads_zero_in_the_padding():
    np.testing.assert_array_equal(Tensor.arange(5).pad(((1, 2),)).numpy(), np.pad(np.arange(5), (1, 2)))
    np.testing.assert_array_equal(Tensor.arange(5).pad(((1, 1),), value=7).numpy(), np.pad(np.arange(5), 1, constant_values=7))
    np.testing.assert_array_equal(Tensor.stack(Tensor.arange(3), Tensor.arange(3) * 2).numpy(), [[0, 1, 2], [0, 2, 4]])
    # a shrink or flip applied after the pad's gate: the gate is inside the index arithmetic
    np.testing.assert_array_equal(Tensor.arange(4)[1:].pad(((1, 0),)).numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(Tensor.arange(4).flip(0).pad(((1, 0),)).numpy(), [0, 3, 2, 1, 0])
    assert (Tensor.arange(8)[2:].pad(((2, 0),)) * Tensor.ones(8)).sum().numpy() == 27
    x = Tensor.arange(6).reshape(2, 3).pad(((1, 0), (0, 2))).reshape(15)[3:15].reshape(3, 4).sum(1)
    np.testing.assert_array_equal(x.numpy(), np.pad(np.arange(6).reshape(2, 3), ((1, 0), (0, 2))).reshape(15)[3:15].reshape(3, 4).sum(1))


def test_assign_an_arange_into_a_buffer():
    buf = realized(np.zeros(8, np.int32))
    buf.assign(Tensor.arange(8))
    assert len(Tensor.schedule(buf)) == 1
    buf.realize()
    np.testing.assert_array_equal(buf.numpy(), np.arange(8))


def test_arange_arguments_must_be_numbers():
    with pytest.raises(TypeError, match="Python numbers"):
        Tensor.arange(Tensor.arange(3))


W = np.array([3, -1, 4, 1], np.int32)

# (program, numpy reference, whether the kernel keeps a reduce loop)
FOLDS = [
    ("sum over one axis", lambda: Tensor.arange(16).reshape(4, 4).sum(1), np.arange(16).reshape(4, 4).sum(1), False),
    ("sum over all axes", lambda: Tensor.arange(16).reshape(4, 4).sum(), np.arange(16).sum(), False),
    ("start and step", lambda: Tensor.arange(3, 40, 3).sum(), np.arange(3, 40, 3).sum(), False),
    ("negative step", lambda: Tensor.arange(10, -7, -2).sum(), np.arange(10, -7, -2).sum(), False),
    ("times an invariant range", lambda: (Tensor.arange(16).reshape(4, 4) * Tensor.arange(4)).sum(0),
     (np.arange(16).reshape(4, 4) * np.arange(4)).sum(0), False),
    ("times a loaded value", lambda: (realized(W).reshape(4, 1) * Tensor.arange(5).reshape(1, 5)).sum(1),
     (W.reshape(4, 1) * np.arange(5)).sum(1), False),
    ("narrowing cast, sum in int8", lambda: Tensor.arange(200).cast(dtypes.int8).sum(dtype=dtypes.int8),
     np.arange(200).astype(np.int8).sum(dtype=np.int8), False),
    # int8 values summed in int32: an int8 sum would wrap where the int32 one does not
    ("narrowed then widened", lambda: Tensor.arange(200).cast(dtypes.int8).sum(),
     np.arange(200).astype(np.int8).astype(np.int32).sum(), True),
    ("unsigned wrap, widened", lambda: (-Tensor.arange(10).reshape(5, 2)).cast(dtypes.uint8).sum(1),
     (-np.arange(10).reshape(5, 2)).astype(np.uint8).astype(np.uint32).sum(1), True),
    ("widening cast, small sum", lambda: Tensor.arange(1000).cast(dtypes.int64).sum(), np.arange(1000).sum(), False),
    # the int32 sum would wrap where the int64 one does not: the cast must stay inside the loop
    ("widening cast, big sum", lambda: Tensor.arange(100000).cast(dtypes.int64).sum(), np.arange(100000).sum(), True),
    ("square: not affine", lambda: (Tensor.arange(16) * Tensor.arange(16)).sum(), (np.arange(16) ** 2).sum(), True),
    ("a loaded value per step", lambda: (realized(W) + Tensor.arange(4)).sum(), (W + np.arange(4)).sum(), True),
    ("float: rounding would change", lambda: Tensor.arange(10, dtype=dtypes.float32).sum(),
     np.arange(10, dtype=np.float32).sum(), True),
]


@pytest.mark.parametrize("name,build,expected,keeps_reduce", FOLDS, ids=[f[0] for f in FOLDS])
def test_affine_integer_sums_fold(ran, name, build, expected, keeps_reduce):
    out = build()
    np.testing.assert_allclose(out.numpy(), expected)
    assert len(ran) == 1
    assert has_reduce(ran[0]) == keeps_reduce


@settings(max_examples=60, deadline=None)
@given(start=st.integers(-20, 20), step=st.integers(-5, 5).filter(bool), rows=st.integers(1, 5),
       cols=st.integers(1, 6), scale=st.integers(-3, 3), offset=st.integers(-9, 9), axis=st.sampled_from([0, 1, None]))
def test_folded_sums_equal_numpy(start, step, rows, cols, scale, offset, axis):
    stop = start + step * rows * cols
    t = (Tensor.arange(start, stop, step).reshape(rows, cols) * scale + offset).sum(axis)
    want = (np.arange(start, stop, step).reshape(rows, cols) * scale + offset).sum(axis)
    np.testing.assert_array_equal(t.numpy(), want)


INT_DTYPES = {dtypes.int8: np.int8, dtypes.int16: np.int16, dtypes.int32: np.int32, dtypes.int64: np.int64,
              dtypes.uint8: np.uint8, dtypes.uint32: np.uint32}
SUM_DTYPES = {np.int8: np.int32, np.int16: np.int32, np.uint8: np.uint32}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), step=st.integers(-40, 40).filter(bool), scale=st.integers(-5, 5),
       dtype=st.sampled_from(list(INT_DTYPES)), cols=st.sampled_from([1, 2, 3]))
def test_sums_through_integer_casts_equal_numpy(n, step, scale, dtype, cols):
    """Casts wrap and sums wrap: folded or not, the result is numpy's, wrap-around included."""
    npdt = INT_DTYPES[dtype]
    acc = SUM_DTYPES.get(npdt, npdt)
    t = ((Tensor.arange(0, n * cols * step, step) * scale).cast(dtype).reshape(n, cols)).sum(0)
    with np.errstate(over="ignore"):
        want = (np.arange(0, n * cols * step, step, dtype=np.int64) * scale).astype(npdt).astype(acc)
        want = want.reshape(n, cols).sum(0, dtype=acc)
    np.testing.assert_array_equal(t.numpy(), want)


def _reduces(item) -> int:
    return sum(1 for u in item.ast.toposort() if u.op is Ops.REDUCE)


def test_a_value_summed_over_a_nest_of_ranges_is_one_product(ran):
    # avg_pool2d divides by the pooled count of a ones mask: two window ranges over a constant, which used
    # to run as a loop of `acc += 1.0` in every pooling kernel
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
    got = Tensor(x).realize().avg_pool2d(kernel_size=(2, 3), stride=1).numpy()
    want = sum(x[..., i:i + 5, j:j + 4] for i in range(2) for j in range(3)) / np.float32(6)
    np.testing.assert_array_equal(got, want)
    assert [_reduces(item) for item in ran if _reduces(item)] == [1]  # the window sum only
    ran.clear()
    # a broadcast value's max over two axes is the value, its sum n1*n2 times it (one rounding)
    v = Tensor(np.array([0.1, -2.5], np.float32)).realize()
    out = v.reshape(2, 1, 1).expand(2, 7, 9)
    np.testing.assert_array_equal(out.max((1, 2)).numpy(), np.array([0.1, -2.5], np.float32))
    assert _reduces(ran[-1]) == 0
    np.testing.assert_array_equal(out.sum((1, 2)).numpy(), np.array([0.1, -2.5], np.float32) * np.float32(63))
    assert _reduces(ran[-1]) == 0
