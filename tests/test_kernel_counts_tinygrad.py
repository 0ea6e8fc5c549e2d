"""Kernel counts of issue 11 §4 where rulec now matches tinygrad 0.14 (measured with tinygrad's
schedule_linear on the same programs), with results equal to numpy."""
from __future__ import annotations

import numpy as np
from numpy_ref import np_conv2d

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


def test_a_value_assigned_twice_is_stored_once():
    a = Tensor(np.ones(4, np.float32)).realize()
    b = Tensor.full((4,), 2.0).contiguous()
    first = a.assign(b)
    second = a.assign(b)
    assert len(Tensor.schedule(first, second)) == 2  # tinygrad 0.14: 2 (b, then one assign)
    np.testing.assert_array_equal(second.numpy(), [2.0] * 4)
    c = Tensor(np.ones(4, np.float32)).realize()
    c.assign(c + 1)
    c.assign(c + 1)  # reads what the first assign wrote: two assigns
    np.testing.assert_array_equal(c.numpy(), [3.0] * 4)


def test_a_sum_over_a_broadcast_axis_needs_no_reduce():
    rng = np.random.default_rng(1)
    b1n, b2n, xn = (rng.standard_normal(s).astype(np.float32) for s in ((16,), (16,), (16, 32)))
    b1, b2, x = (Tensor(v).realize() for v in (b1n, b2n, xn))
    pool = lambda t: t.reshape(16, 32, 1).expand(16, 32, 16).sum(2)  # noqa: E731
    base = pool(x) + b1.reshape(16, 1)
    y = pool(pool(base) + b2.reshape(16, 1) + base)
    # tinygrad 0.14: 4 (each sum over the broadcast axis is a product, so `base` has no reduce and is
    # recomputed where it is read instead of stored); rulec stored it while the sums stayed reduces
    assert len(Tensor.schedule(y)) <= 4
    base_n = xn * 16 + b1n[:, None]
    np.testing.assert_allclose(y.numpy(), (base_n * 16 + b2n[:, None] + base_n) * 16, rtol=1e-5)
    np.testing.assert_array_equal(x.reshape(16, 32, 1).expand(16, 32, 3).max(2).numpy(), xn)


def test_contiguous_of_a_value_with_no_device_stays_virtual():
    x = realized()
    out = (x[:, :4] + Tensor.arange(16).reshape(4, 4).contiguous()).sum(1, keepdim=True)
    assert len(Tensor.schedule(out)) == 1  # tinygrad 0.14: 1 (the arange is computed inside the sum)
    np.testing.assert_allclose(out.numpy(), (A[:, :4] + np.arange(16).reshape(4, 4)).sum(1, keepdims=True))


def test_contiguous_of_a_copy_to_another_device_adds_nothing():
    # tinygrad 0.14: x.to(d).contiguous() is the copy alone; (x + 1).to(d).contiguous() 1 kernel and the copy
    x = realized()
    for t, kinds in ((x.to("CPU:1").contiguous(), [("CPU:1", True)]),
                     ((x + 1).to("CPU:1").contiguous(), [("CPU", False), ("CPU:1", True)])):
        assert [(i.device, i.is_copy) for i in Tensor.schedule(t)] == kinds
    np.testing.assert_array_equal((x + 1).to("CPU:1").contiguous().numpy(), A + 1)


def test_a_conv_read_through_the_windows_of_a_conv_is_stored_not_recomputed():
    # the second conv reads each output of the first at 36 window places: fusing them recomputes the first
    # conv 36 times per output, and a chain of such convs grows exponentially. The windows' expand ends
    # the ranges of its broadcast axis even where the kept axis reads them too (tinygrad 0.14: 2 and 3)
    rng = np.random.default_rng(0)
    x, w1, w2, w3 = (rng.standard_normal(s).astype(np.float32)
                     for s in ((2, 1, 8, 8), (4, 1, 3, 3), (4, 4, 3, 3), (1, 4, 3, 3)))
    X, W1, W2, W3 = (Tensor(a).realize() for a in (x, w1, w2, w3))
    two, three = X.conv2d(W1).conv2d(W3), X.conv2d(W1).conv2d(W2).conv2d(W3)
    assert len(two.schedule()) == 2 and len(X.conv2d(W1).relu().conv2d(W3).schedule()) == 2
    assert len(three.schedule()) == 3
    np.testing.assert_allclose(two.numpy(), np_conv2d(np_conv2d(x, w1), w3), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(three.numpy(), np_conv2d(np_conv2d(np_conv2d(x, w1), w2), w3), rtol=1e-4, atol=1e-4)
