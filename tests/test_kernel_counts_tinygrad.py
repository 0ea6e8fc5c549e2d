"""Kernel counts of issue 11 §4 where rulec now matches tinygrad 0.14 (measured with tinygrad's
schedule_linear on the same programs), with results equal to numpy."""
from __future__ import annotations

import numpy as np

from rulec import Tensor

A = np.arange(24, dtype=np.float32).reshape(4, 6)


def realized():
    return Tensor(A.copy()).realize()


def test_assigning_a_buffer_its_own_value_is_free():
    for make in (lambda x: x.assign(x), lambda x: x.assign(x - 0.0)):
        x = realized()
        y = make(x)
        assert Tensor.schedule(y) == []  # tinygrad 0.14: 0 kernels
        np.testing.assert_array_equal(y.numpy(), A)
        np.testing.assert_array_equal(x.numpy(), A)


def test_contiguous_twice_stores_once():
    x = realized()
    y = (x * 2).contiguous().contiguous()
    assert len(Tensor.schedule(y)) == 1  # tinygrad 0.14: 1
    np.testing.assert_array_equal(y.numpy(), A * 2)


def test_minus_zero_keeps_negative_zero_and_nan():
    x = Tensor(np.array([-0.0, np.nan, 1.5], np.float32)).realize()
    got = (x - 0.0).numpy()
    assert np.signbit(got[0]) and np.isnan(got[1]) and got[2] == 1.5


def test_a_python_scalar_tensor_has_no_device_and_runs_no_kernel():
    t = Tensor(2)
    assert t.device is None  # tinygrad 0.14: None
    assert Tensor.schedule(t.contiguous()) == []  # tinygrad 0.14: 0 kernels
    np.testing.assert_array_equal((t + Tensor([1, 2])).numpy(), [3, 4])
    assert t.numpy() == 2


def test_contiguous_of_a_realized_buffer_reshape_or_part_is_free():
    x = realized()
    for view in (x, x.reshape(6, 4), x[:2], x[1:], x[1], x.flatten()[3:9]):
        assert Tensor.schedule(view.contiguous()) == []  # tinygrad 0.14: 0 kernels each
    np.testing.assert_array_equal(x[1:].contiguous().numpy(), A[1:])
    assert len(Tensor.schedule(x[:, :2].contiguous())) == 1  # a strided part is copied, as in tinygrad


def test_a_one_element_reduce_read_by_two_outputs_is_recomputed():
    y = Tensor(np.arange(12, dtype=np.float32)).realize()
    s = y.sum(keepdim=True)
    a, b = s + 1, s * 2
    assert len(Tensor.schedule(a, b)) == 2  # tinygrad 0.14: 2 (rulec had 3: s stored first)
    Tensor.realize(a, b)
    np.testing.assert_array_equal(a.numpy(), [67.0])
    np.testing.assert_array_equal(b.numpy(), [132.0])


def test_a_reduce_concatenated_with_itself_is_one_kernel():
    x = realized()
    s = x.sum(axis=1)
    out = s.cat(s)
    assert len(Tensor.schedule(out)) == 1  # tinygrad 0.14: 1
    np.testing.assert_array_equal(out.numpy(), np.concatenate([A.sum(1)] * 2))
    np.testing.assert_array_equal(x.cat(x, x, dim=1).numpy(), np.concatenate([A] * 3, axis=1))
