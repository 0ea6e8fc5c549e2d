"""What the scheduler chooses to store: buffers hold no broadcast axes of their own making.

The scheduler buffers a node that several consumers read over different loops. When that node is a
broadcast (an EXPAND of something smaller, as the gradient of a matmul's sum is), the buffer must keep
only the axes its value depends on: storing the broadcast multiplies memory and work by its size.
"""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor


def _written(items) -> list[int]:
    """The size of the buffer each kernel of a schedule writes."""
    return [it.buffers[0].arg for it in items if not it.is_copy]


def _gelu(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tanh-approximated gelu and its derivative, in float64."""
    k = np.sqrt(2 / np.pi)
    inner = k * (h + 0.044715 * h ** 3)
    t = np.tanh(inner)
    return 0.5 * h * (1 + t), 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * k * (1 + 3 * 0.044715 * h * h)


def _mlp(seed: int, t: int, d: int, hid: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d)).astype(np.float32)
    w1 = (rng.standard_normal((d, hid)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((hid, d)) / np.sqrt(hid)).astype(np.float32)
    return x, w1, w2


def test_a_matmul_gradient_stores_no_broadcast_product():
    t, d, hid = 64, 32, 48
    x, w1, w2 = _mlp(0, t, d, hid)
    tx, tw1, tw2 = Tensor(x), Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True)
    (tx @ tw1).gelu().matmul(tw2).square().mean().backward()
    items = Tensor.schedule(tw1.grad, tw2.grad)
    # the largest tensor of the program is t x hid; the broadcast products are t x hid x d
    assert max(_written(items)) <= t * hid, _written(items)
    h = x.astype(np.float64) @ w1
    a, da = _gelu(h)
    dy = 2 * (a @ w2) / (t * d)
    np.testing.assert_allclose(tw2.grad.numpy(), a.T @ dy, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(tw1.grad.numpy(), x.T @ ((dy @ w2.T) * da), rtol=2e-4, atol=1e-6)


def test_a_shared_broadcast_is_stored_at_its_own_size():
    # e is read over (i, j) by a sum over i and a sum over j: its consumers' loops differ, so it is stored
    a = np.arange(1, 4, dtype=np.float32).reshape(3, 1)
    ta = Tensor(a)
    e = (ta.sum(axis=0, keepdim=True) + ta).expand(3, 4)
    rows, cols = (e * 2).sum(axis=1), (e * 3).sum(axis=0)
    assert max(_written(Tensor.schedule(rows, cols))) <= 4
    ea = np.broadcast_to(a.sum(0, keepdims=True) + a, (3, 4))
    np.testing.assert_allclose(rows.numpy(), (ea * 2).sum(1))
    np.testing.assert_allclose(cols.numpy(), (ea * 3).sum(0))


def test_a_tensor_that_is_a_broadcast_keeps_its_shape():
    a = Tensor(np.arange(3, dtype=np.float32).reshape(3, 1))
    b = (a + 1).expand(3, 5).contiguous()
    assert _written(Tensor.schedule(b)) == [15]
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(np.arange(1, 4, dtype=np.float32)[:, None], (3, 5)))


@pytest.mark.parametrize("fn", ["tanh", "sigmoid", "gelu"])
def test_saturating_activations_have_finite_gradients(fn):
    # past |x| ~ 44 (tanh) 2**x overflows float32: the gradient there is 0, never 0 * inf = NaN
    xs = np.array([-200., -60., -11., -1., 0., 1., 11., 60., 200.], dtype=np.float32)
    x = Tensor(xs, requires_grad=True)
    getattr(x, fn)().sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all(), g
    x64 = xs.astype(np.float64)
    want = {"tanh": 1 - np.tanh(x64) ** 2,
            "sigmoid": np.exp(-np.abs(x64)) / (1 + np.exp(-np.abs(x64))) ** 2,
            "gelu": _gelu(x64)[1]}[fn]
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-7)


def test_a_gradient_read_through_a_convolution_window_is_stored_when_it_reads_many_buffers():
    # conv -> relu -> conv -> relu -> batchnorm -> max_pool: the gradient of the second conv's output reads
    # six buffers (the batchnorm statistics and the activations). The input gradient of that conv reads it
    # once per tap of its 5x5 window, so recomputing it there cost 26M value operations in one kernel;
    # stored (tinygrad 0.14 stores a value of more than three buffers), the largest kernel is 9.8M
    from rulec import nn
    from rulec.helpers import Context

    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((4, 1, 16, 16)).astype(np.float32)).realize()
    layers = [nn.Conv2d(1, 8, 3), Tensor.relu, nn.Conv2d(8, 8, 5), Tensor.relu, nn.BatchNorm2d(8), Tensor.max_pool2d]
    with Context(TRAINING=1):
        out = x.sequential(layers)
        loss = (out * Tensor(rng.standard_normal(out.shape).astype(np.float32))).sum()
        grads = loss.gradient(layers[0].weight, layers[2].weight, layers[4].weight)
    items = Tensor.schedule(*grads)
    assert max(it.ops for it in items) < 12_000_000, sorted(it.ops for it in items)
