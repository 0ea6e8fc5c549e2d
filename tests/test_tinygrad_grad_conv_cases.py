"""Programs in the style of tinygrad's gradient and convolution tests (test/unit/test_gradient.py,
test/unit/test_conv.py, test/backend/test_conv.py): the kernels a log-sum-exp's backward pass needs, and
the exception classes tinygrad's tests expect of a non-scalar backward and of shapes a convolution or
pooling cannot take. The programs are our own; numpy gives the values."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor

rng = np.random.default_rng(1717)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _logsumexp_grad(x: np.ndarray, axis: int | None) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape, axis, kernels", [((12,), 0, 2), ((3, 4), 0, 3), ((3, 4), 1, 2), ((3, 4), None, 2)])
def test_logsumexp_backward_does_not_differentiate_the_shift(shape, axis, kernels):
    # the max that shifts the exponent cancels out of the result: its gradient is zero, so the backward
    # pass needs no tie-counting kernels through it (tinygrad 0.14: 2, 3, 3, 2 kernels)
    xn = f32(*shape)
    x = Tensor(xn)
    x.logsumexp(axis).sum().backward()
    assert len(Tensor.schedule(x.grad)) <= kernels
    np.testing.assert_allclose(x.grad.numpy(), _logsumexp_grad(xn, axis), rtol=1e-5, atol=1e-6)


def test_logsumexp_backward_with_ties_and_infinities():
    x = Tensor([[2.0, 2.0, 1.0], [-np.inf, -np.inf, 0.5]])
    x.logsumexp(1).sum().backward()
    e = np.exp(np.array([0.0, 0.0, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [e / e.sum(), [0.0, 0.0, 1.0]], rtol=1e-6)
    y = Tensor([1.0, 3.0, 3.0])
    y.logcumsumexp(0).sum().backward()  # built on logsumexp: a ramp of softmaxes
    yn = np.array([1.0, 3.0, 3.0])
    want = sum(np.pad(_logsumexp_grad(yn[:k], 0), (0, 3 - k)) for k in (1, 2, 3))
    np.testing.assert_allclose(y.grad.numpy(), want, rtol=1e-6)


def test_backward_of_a_non_scalar_is_the_assertion_tinygrad_raises():
    x = Tensor([1.0, 2.0, 3.0])
    z = x * x
    with pytest.raises(AssertionError, match=r"needs a scalar, but the shape is \(3,\)"):
        z.gradient(x)
    with pytest.raises(RuntimeError, match="needs a scalar"):  # still the GradientError it was
        z.backward()
    np.testing.assert_allclose(z.gradient(x, gradient=Tensor([1.0, 1.0, 1.0]))[0].numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("build, words", [
    (lambda: Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(1, 2, 3, 3)), r"input \(1, 3, 5, 5\) does not match"),
    (lambda: Tensor.ones(1, 3, 5).conv2d(Tensor.ones(1, 3, 3, 3)), "same rank"),
    (lambda: Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3)), r"kernel \(3, 3\) is larger"),
    (lambda: Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 3, 3), dilation=2), "dilated kernel"),
    (lambda: Tensor.ones(1, 3, 5, 5).conv_transpose2d(Tensor.ones(2, 2, 3, 3)), "conv_transpose2d: input"),
    (lambda: Tensor.ones(1, 1, 2, 2).max_pool2d(3), "pooling window 3 is larger"),
    (lambda: Tensor.ones(1, 1, 2, 2).avg_pool2d(3), "pooling window 3 is larger"),
])
def test_shapes_a_convolution_cannot_take_are_assertion_errors(build, words):
    # tinygrad asserts on these shapes; the error stays a ValueError (and RuntimeError) as before
    with pytest.raises(AssertionError, match=words):
        build()
    with pytest.raises(ValueError, match=words):
        build()


def _np_scatter_last(base: np.ndarray, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = base.copy()
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):  # in order: the last writer of a place wins
            out[i, index[i, j]] = src[i, j]
    return out


def test_scatter_picks_the_last_writer_in_one_kernel_and_its_gradient_in_two():
    base, src = f32(3, 5), f32(3, 3)
    index = np.array([[0, 0, 1], [4, 4, 4], [2, 1, 2]])
    out = Tensor(base).scatter(1, Tensor(index), Tensor(src))
    assert len(Tensor.schedule(out)) == 1  # tinygrad 0.14: 1
    np.testing.assert_array_equal(out.numpy(), _np_scatter_last(base, index, src))
    a, s, w = Tensor(base), Tensor(src), f32(3, 5)
    (a.scatter(1, Tensor(index), s) * Tensor(w)).sum().backward()
    assert len(Tensor.schedule(a.grad, s.grad)) <= 2  # tinygrad 0.14: 2
    hit = np.zeros((3, 5), bool)
    hit[np.arange(3)[:, None], index] = True
    np.testing.assert_allclose(a.grad.numpy(), np.where(hit, 0, w), rtol=1e-6)
    last = np.array([[i == max(k for k in range(3) if index[r, k] == index[r, i]) for i in range(3)] for r in range(3)])
    np.testing.assert_allclose(s.grad.numpy(), np.where(last, np.take_along_axis(w, index, 1), 0), rtol=1e-6)


def test_scatter_of_bools_and_of_many_writers_keeps_dtype_and_values():
    flags = Tensor(np.zeros((2, 4), bool)).scatter(1, Tensor([[0, 2], [3, 3]]), Tensor([[True, True], [True, False]]))
    assert flags.dtype == Tensor([True]).dtype
    np.testing.assert_array_equal(flags.numpy(), [[True, False, True, False], [False, False, False, False]])
    base, src = f32(2, 5), f32(2, 40)  # more writers than the unrolled chain takes: ranked by a reduce
    index = np.arange(80).reshape(2, 40) % 5
    out = Tensor(base).scatter(1, Tensor(index), Tensor(src))
    assert len(Tensor.schedule(out)) == 1  # the ranking fuses with what reads it (tinygrad 0.14: 1)
    np.testing.assert_array_equal(out.numpy(), _np_scatter_last(base, index, src))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
def test_scatter_reduce_including_self_needs_no_written_mask(reduce):
    # with include_self an unwritten place reduces nothing into self, so the result is the reduce itself and
    # the backward pass has no count of writers to keep (tinygrad 0.14: 2, 2, 4, 4, 5 kernels)
    kernels = {"sum": 2, "mean": 2, "amax": 4, "amin": 4, "prod": 5}[reduce]
    base, src = f32(3, 4), f32(3, 3)
    index = np.array([[0, 0, 1], [3, 3, 3], [2, 1, 2]])
    a, s = Tensor(base), Tensor(src)
    out = a.scatter_reduce(1, Tensor(index), s, reduce)
    want = base.astype(np.float64).copy()
    groups: dict = {}
    for r in range(3):
        for k in range(3):
            groups.setdefault((r, index[r, k]), [base[r, index[r, k]]]).append(src[r, k])
    pick = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min, "prod": np.prod}[reduce]
    for (r, c), vals in groups.items():
        want[r, c] = pick(vals)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    assert len(Tensor.schedule(a.grad, s.grad)) <= kernels
    if reduce == "sum":
        np.testing.assert_allclose(a.grad.numpy(), 2 * want, rtol=1e-5)
        np.testing.assert_allclose(s.grad.numpy(), np.take_along_axis(2 * want, index, 1), rtol=1e-5)


def test_a_stride_or_dilation_of_the_wrong_length_is_an_assertion_error():
    x, w = Tensor.ones(1, 2, 7, 6), Tensor.ones(3, 2, 3, 3)
    for kw in ({"stride": (2,)}, {"dilation": (1, 2, 1)}):
        with pytest.raises(AssertionError, match="must be an int or 2 ints"):
            x.conv2d(w, **kw)


def test_a_detached_tensor_as_a_target_gets_its_gradient():
    # detach cuts the path below it, not at it: d(x * y)/dy is x for y = x.detach()
    x = Tensor([1.0, 2.0, 3.0])
    y = x.detach()
    gx, gy = (x * y * y).sum().gradient(x, y)
    np.testing.assert_allclose(gx.numpy(), [1.0, 4.0, 9.0])
    np.testing.assert_allclose(gy.numpy(), [2.0, 8.0, 18.0])
    a = Tensor([1.0, 2.0, 3.0])
    b = (a * 2).detach()
    (a * b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])  # nothing flows into a through b


def _np_conv3d(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    x = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * 3)
    k = w.shape[2:]
    out = np.zeros((x.shape[0], w.shape[0]) + tuple(s - kk + 1 for s, kk in zip(x.shape[2:], k)), np.float64)
    for idx in np.ndindex(*out.shape[2:]):
        win = x[:, :, idx[0]:idx[0] + k[0], idx[1]:idx[1] + k[1], idx[2]:idx[2] + k[2]]
        out[(slice(None), slice(None)) + idx] = np.einsum("ncdhw,ocdhw->no", win, w)
    return out


def test_nn_conv2d_takes_a_kernel_of_three_axes_as_a_volume():
    from rulec import nn
    x, w, b = f32(1, 2, 4, 5, 6), f32(3, 2, 2, 3, 3), f32(3)
    conv = nn.Conv2d(2, 3, (2, 3, 3), padding=1)
    assert conv.weight.shape == (3, 2, 2, 3, 3)  # every axis kept (tinygrad 0.14 too)
    conv.weight, conv.bias = Tensor(w), Tensor(b)
    want = _np_conv3d(x, w, 1) + b.reshape(1, 3, 1, 1, 1)
    np.testing.assert_allclose(conv(Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)
    same = nn.Conv2d(2, 3, (3, 2, 4), padding="same")
    assert same(Tensor(x)).shape == (1, 3, 4, 5, 6)
    assert nn.ConvTranspose2d(2, 3, (2, 2, 2), stride=2)(Tensor(x)).shape == (1, 3, 8, 10, 12)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
def test_scatter_reduce_leaves_self_where_the_index_does_not_reach(reduce):
    # an index with fewer rows than self: the rows it does not reach keep self's values
    base, src = f32(3, 4), f32(2, 2)
    index = np.array([[0, 0], [3, 1]])
    out = Tensor(base).scatter_reduce(1, Tensor(index), Tensor(src), reduce).numpy()
    np.testing.assert_array_equal(out[2], base[2])
    np.testing.assert_array_equal(out[0, 1:], base[0, 1:])
