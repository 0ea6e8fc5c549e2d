"""Kernel-count and dtype gaps against tinygrad 0.14 closed in rulec (counts measured with tinygrad 0.14's
schedule_linear on the same programs), with results equal to numpy."""
from __future__ import annotations

import numpy as np
from numpy_ref import np_conv2d

from rulec import Tensor, dtypes


def _np_conv_grads(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of sum(conv2d(x, w) * g) with respect to x and w."""
    kh, kw = w.shape[2:]
    oh, ow = g.shape[2:]
    dx, dw = np.zeros(x.shape), np.zeros(w.shape)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i:i + oh, j:j + ow] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j])
            dw[:, :, i, j] = np.einsum("nohw,nchw->oc", g, x[:, :, i:i + oh, j:j + ow])
    return dx, dw


def test_conv_relu_avg_pool_loss_and_grads_recompute_the_pool_gradient():
    # the avg-pool's gradient is a sum over window taps of constants (how many windows hold each place): a
    # reduce that reads no memory, so the relu-masked gradient of the conv is recomputed in both weight and
    # input gradients instead of stored (tinygrad 0.14: 4; rulec had 5)
    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal((2, 2, 8, 8)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    x, w = Tensor(xn).realize(), Tensor(wn).realize()
    loss = x.conv2d(w).relu().avg_pool2d().sum()
    dx, dw = loss.gradient(x, w)
    assert len(Tensor.schedule(loss, dx, dw)) == 4
    conv = np_conv2d(xn, wn)
    g = (conv > 0) * 0.25  # each 2x2 window (stride 2) covers the 6x6 output exactly once
    want_dx, want_dw = _np_conv_grads(xn, wn, g)
    Tensor.realize(loss, dx, dw)
    np.testing.assert_allclose(loss.numpy(), (np.maximum(conv, 0) * 0.25).sum(), rtol=1e-4)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw.numpy(), want_dw, rtol=1e-4, atol=1e-5)


def test_prod_keeps_the_dtype_of_small_ints_and_bools():
    # tinygrad 0.14 widens a sum (int8 -> int32) but not a product: it wraps in the tensor's own dtype
    i8 = Tensor(np.array([100, 100, 3, 1], np.int8))
    assert i8.prod().dtype == dtypes.int8 and i8.sum().dtype == dtypes.int32
    assert i8.prod().item() == np.array([100, 100, 3], np.int8).prod(dtype=np.int8)  # 30000 wraps to 48
    u8 = Tensor(np.array([[1, 2], [3, 4]], np.uint8))
    assert u8.prod(0).dtype == dtypes.uint8
    np.testing.assert_array_equal(u8.prod(0).numpy(), [3, 8])
    b = Tensor(np.array([[True, False], [True, True]]))
    assert b.prod(1).dtype == dtypes.bool
    np.testing.assert_array_equal(b.prod(1).numpy(), [False, True])
    assert i8.prod(dtype=dtypes.int32).item() == 30000  # an explicit dtype still widens


def test_indexing_by_a_computed_index_needs_no_mask_buffer():
    # the index is broadcast over the other axes before it is compared with the positions, so the bool
    # one-hot mask is never stored on its own: the pick reads the row at the argmax directly
    # (tinygrad 0.14: 2 each; rulec had 3, the mask a kernel of its own)
    tn = np.random.default_rng(2).standard_normal((4, 5, 3)).astype(np.float32)
    t = Tensor(tn).realize()
    flat = Tensor(tn[:, :, 0]).realize()
    row = flat[flat.sum(1).argmax()]
    col = flat[:, flat.sum(0).argmax()]
    part = t[t.sum((1, 2)).argmax(), 1:3]
    for out in (row, col, part):
        assert len(Tensor.schedule(out)) == 2
    np.testing.assert_array_equal(row.numpy(), tn[:, :, 0][tn[:, :, 0].sum(1).argmax()])
    np.testing.assert_array_equal(col.numpy(), tn[:, :, 0][:, tn[:, :, 0].sum(0).argmax()])
    np.testing.assert_array_equal(part.numpy(), tn[tn.sum((1, 2)).argmax(), 1:3])


def test_a_value_of_constants_is_computed_on_the_device_it_is_copied_to():
    # no buffer on the source device and no copy: the constants are placed on the target device instead
    # (tinygrad 0.14 stores the value and copies it: a kernel and a copy; rulec had the same, and a copy to
    # a pair of devices stored the constant twice on the first)
    for make, want in ((lambda: Tensor.ones(4, 4).to("CPU:1"), np.ones((4, 4))),
                       (lambda: Tensor.full((4,), 2.0).reshape(4, 1).expand(4, 3).to("CPU:1"), np.full((4, 3), 2.0)),
                       (lambda: (Tensor.full((3,), 2.0) * 3).to("CPU:1"), np.full(3, 6.0))):
        t = make()
        assert all(not i.is_copy and i.device == "CPU:1" for i in Tensor.schedule(t))
        assert t.device == "CPU:1"
        np.testing.assert_array_equal(t.numpy(), want)
    pair = Tensor.ones(8).to(("CPU", "CPU:1"))
    assert [(i.device, i.is_copy) for i in Tensor.schedule(pair)] == [("CPU", False)]
    np.testing.assert_array_equal((pair * 2).numpy(), np.full(8, 2.0))
    stored = Tensor(np.arange(4, dtype=np.float32)).realize()
    assert [i.is_copy for i in Tensor.schedule((stored + Tensor.ones(4)).to("CPU:1"))] == [False, True]


def _np_replicate_pad_grad(g: np.ndarray, pad: int, shape: tuple[int, int]) -> np.ndarray:
    """The gradient of a replicate pad by `pad` on both axes: each padded place adds to the edge it copies."""
    out = np.zeros(shape)
    rows = np.clip(np.arange(g.shape[0]) - pad, 0, shape[0] - 1)
    cols = np.clip(np.arange(g.shape[1]) - pad, 0, shape[1] - 1)
    np.add.at(out, (rows[:, None], cols[None, :]), g)
    return out
