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
