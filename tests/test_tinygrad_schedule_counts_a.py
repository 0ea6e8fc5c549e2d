"""Kernel counts and results of scheduler programs where rulec differed from tinygrad 0.14 (counts measured
with tinygrad's schedule_linear on the same programs; results compared with numpy)."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor


def grid(n: int) -> Tensor:
    """An n*n arange as a (1, 1, n, n) float image: it has no device (virtual)."""
    return Tensor.arange(n * n).reshape(1, 1, n, n).float()


def np_avg_pool(img: np.ndarray, k: int, pad: int) -> np.ndarray:
    """Average pooling with stride k, the zero padding counted in the divisor."""
    p = np.pad(img, pad)
    rows, cols = (p.shape[0] - k) // k + 1, (p.shape[1] - k) // k + 1
    return np.array([[p[i * k:i * k + k, j * k:j * k + k].mean() for j in range(cols)] for i in range(rows)])


@pytest.mark.parametrize("pad", [0, 1])
def test_pooling_an_arange_image_stays_virtual(pad):
    out = grid(6).avg_pool2d(padding=pad)
    assert out.device is None
    assert Tensor.schedule(out) == []  # tinygrad 0.14: 0 (rulec had 1: the divisor's ones had a device)
    want = np_avg_pool(np.arange(36, dtype=np.float32).reshape(6, 6), 2, pad)
    np.testing.assert_allclose(out.numpy()[0, 0], want, rtol=1e-6)


def test_pooling_a_stored_image_is_one_kernel():
    img = np.random.default_rng(3).standard_normal((2, 3, 7, 7)).astype(np.float32)
    out = Tensor(img).realize().avg_pool2d(padding=1)
    assert len(Tensor.schedule(out)) == 1  # tinygrad 0.14: 1
    np.testing.assert_allclose(out.numpy()[1, 2], np_avg_pool(img[1, 2], 2, 1), rtol=1e-5, atol=1e-6)


def test_const_like_has_no_device():
    stored = Tensor(np.array([1.5, -2.0], np.float32)).realize()
    c = stored.const_like(4)
    assert c.device is None and c.dtype == stored.dtype
    assert Tensor.schedule(c.contiguous()) == []  # tinygrad 0.14: 0
    np.testing.assert_array_equal((c * stored).numpy(), [6.0, -8.0])


def test_library_constants_of_virtual_inputs_have_no_device():
    v = Tensor.arange(12).reshape(3, 4).float()
    labels = Tensor.arange(3)
    outs = {
        "loss": v.sparse_categorical_crossentropy(labels, reduction="sum"),
        "isinf": v.isinf(detect_positive=False),
        "scatter": v.scatter(0, Tensor.arange(4).reshape(1, 4) % 3, 7.0),
        "causal": v.reshape(1, 3, 4).scaled_dot_product_attention(v.reshape(1, 3, 4), v.reshape(1, 3, 4), is_causal=True),
    }
    for name, t in outs.items():
        assert t.device is None, name
        assert Tensor.schedule(t) == [], name  # tinygrad 0.14: 0 each
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    logp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    np.testing.assert_allclose(outs["loss"].numpy(), -logp[[0, 1, 2], [0, 1, 2]].sum(), rtol=1e-5)
    scattered = x.copy()
    scattered[np.arange(4) % 3, np.arange(4)] = 7.0
    np.testing.assert_array_equal(outs["scatter"].numpy(), scattered)


def np_replicate(x: np.ndarray, before: int, after: int, axis: int) -> np.ndarray:
    """Replicate padding with negative amounts as tinygrad orders it: pad the edges, then crop."""
    grown = np.pad(x, [(max(before, 0), max(after, 0)) if a == axis else (0, 0) for a in range(x.ndim)], mode="edge")
    n = grown.shape[axis]
    return np.take(grown, range(-min(before, 0), n + min(after, 0)), axis=axis)


def test_replicate_and_reflect_pads_with_negative_amounts_crop():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = Tensor(x).pad((-1, 3, 2, -1), mode="replicate")  # last axis (-1, 3), first axis (2, -1)
    np.testing.assert_array_equal(t.numpy(), np_replicate(np_replicate(x, -1, 3, 1), 2, -1, 0))
    # a crop may cut into the padding: the axis of 4 rows is grown by 2 and then loses 4
    np.testing.assert_array_equal(Tensor(x).pad(((-4, 2), None), mode="replicate").numpy(), x[[3, 3]])
    reflected = Tensor(x).pad(((0, 0), (-1, 4)), mode="reflect").numpy()  # reflect the whole row, then crop
    np.testing.assert_array_equal(reflected, np.pad(x, ((0, 0), (0, 4)), mode="reflect")[:, 1:])
    circular = Tensor(x).pad(((0, 0), (-1, 4)), mode="circular").numpy()  # crop first, then wrap
    np.testing.assert_array_equal(circular, np.pad(x[:, 1:], ((0, 0), (0, 4)), mode="wrap"))
    with pytest.raises(ValueError, match="circular padding"):
        Tensor(x).pad(((0, 0), (-2, 4)), mode="circular")  # wraps past the 3 columns the crop leaves


def test_gradient_of_a_sum_of_a_replicate_pad_is_virtual():
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)).realize()
    y = x.pad((-1, 2, 2, -1), mode="replicate")
    dx = y.sum().gradient(x)[0]
    assert Tensor.schedule(dx) == []  # tinygrad 0.14: 0 (the gradient reads no buffer)
    plane = np.array([[0.0, 3.0, 9.0], [0.0, 1.0, 3.0], [0.0, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(dx.numpy(), np.broadcast_to(plane, (2, 3, 3)))
    (x * 3).sum().backward()  # backward stores .grad on x's device
    assert x.grad is not None and x.grad.device == x.device
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3, 3), 3.0, np.float32))


def test_circular_pad_of_a_stored_tensor_is_a_view():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    stored = Tensor(x).realize()
    for pads, want in (((1, 2), ((0, 0), (1, 2))), ((-1, 3, 1, 0), ((1, 0), (0, 3)))):
        t = stored.pad(pads, mode="circular")
        assert Tensor.schedule(t) == []  # tinygrad 0.14: 0 (a view: the axis repeated, then a window of it)
        cropped = x[:, 1:] if pads[0] < 0 else x
        np.testing.assert_array_equal(t.numpy(), np.pad(cropped, want, mode="wrap"))
    assert len(Tensor.schedule(stored.pad((1, 2), mode="circular").contiguous())) == 1  # tinygrad 0.14: 1


def stored_row() -> Tensor:
    return Tensor(np.arange(4, dtype=np.float32)).realize()


@pytest.mark.parametrize("make", [lambda a: a.clone(), lambda a: (a * 2).clone(), lambda a: a[1:3].clone(),
                                  lambda a: a.reshape(2, 2).T.clone().reshape(4), lambda a: a.clone(device="CPU:1"),
                                  lambda a: a.shard(("CPU", "CPU:1"), axis=0).clone()])  # (a multi-device clone raised)
def test_two_clones_of_one_tensor_are_two_buffers(make):
    a = stored_row()
    first, second = make(a), make(a)
    Tensor.realize(first, second)
    kept = second.numpy().copy()
    first.assign(first + 100).realize()
    np.testing.assert_array_equal(second.numpy(), kept)  # rulec had: the clones shared one buffer
    np.testing.assert_array_equal(first.numpy(), kept + 100)
    np.testing.assert_array_equal(a.numpy(), np.arange(4))


def test_a_clone_is_one_kernel_even_of_a_view_or_a_computation():
    a = stored_row()
    assert len(Tensor.schedule(a.clone(), a.clone())) == 2  # tinygrad 0.14: 2 (rulec had 1: deduplicated)
    for view in (a.reshape(2, 2).T, a[1:3], a + 1):
        assert len(Tensor.schedule(view.clone())) == 1  # tinygrad 0.14: 1 (rulec had 2: a kernel, then a copy)
    np.testing.assert_array_equal(a.reshape(2, 2).T.clone().numpy(), [[0, 2], [1, 3]])
    np.testing.assert_array_equal((a + 1).clone().numpy(), [1, 2, 3, 4])


@pytest.mark.parametrize("dtype, want", [("float16", "float16"), ("float64", "float64"), ("int32", "float32")])
def test_average_pooling_keeps_a_float_dtype(dtype, want):
    img = np.random.default_rng(1).integers(-8, 8, (1, 2, 6, 6)).astype(np.float32)
    out = Tensor(img).cast(dtype).avg_pool2d(padding=1)
    assert out.dtype.name == want  # tinygrad 0.14: half stays half (rulec gave float32)
    np.testing.assert_allclose(out.float().numpy()[0, 1], np_avg_pool(img[0, 1], 2, 1), rtol=1e-2, atol=1e-2)
