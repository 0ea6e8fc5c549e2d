"""What tinygrad 0.14's multi-device and sub-buffer tests ask of rulec: a strided setitem writes only its
places; an all-reduce of a broadcast partial result (a data-parallel conv's weight gradient) copies whole
buffers; a shrink across the shard axis (a batch split, a setitem across shards) is replicated; operands
sharded on different axes are resharded (every matmul layout); integer BatchNorm statistics stay float;
random tensors and dropout laid out as a multi-device tensor; `shard_like` and `replace`. numpy is the
oracle (docs/multi-device.md)."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, nn
from rulec.helpers import Context
from rulec.nn.optim import Adam
from rulec.nn.state import get_parameters
from rulec.runtime.tensor.multi import MultiDeviceError

D2 = ("CPU:1", "CPU:2")
D4 = ("CPU", "CPU:1", "CPU:2", "CPU:3")
rng = np.random.default_rng(16)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- setitem with a step


@pytest.mark.parametrize("devices,axis", [(None, None), (D4, None), (D4, 0)])
def test_a_strided_setitem_writes_only_its_places(devices, axis):
    # a whole axis taken with a step was treated as every place: the tensor became the 4 written values
    want = np.arange(16)
    want[::4] = 0
    t = Tensor.arange(16).contiguous().realize()
    if devices:
        t = t.shard(devices, axis=axis)
    t[::4] = 0
    assert t.shape == (16,) and t.tolist() == want.tolist()
    m = np.arange(16, dtype=np.int32).reshape(4, 4)
    t2 = Tensor(m.copy())
    t2[:, ::2] = Tensor([[7, 8]] * 4)
    m[:, ::2] = [7, 8]
    assert t2.tolist() == m.tolist()


# ---------------------------------------------------------------- all-reduce of a broadcast partial result


def test_an_all_reduce_of_a_broadcast_partial_result_copies_whole_buffers():
    # each device's partial sum is broadcast along an axis it does not depend on; the scheduler stored
    # only its live part, and the copy to the other device read it broadcast ("not a whole-buffer copy")
    x = f32(4, 3)
    s = Tensor(x).shard(D2, 0).reshape(4, 1, 3).expand(4, 5, 3)
    np.testing.assert_allclose(s.sum(0).numpy(), np.broadcast_to(x.sum(0), (5, 3)), rtol=1e-5)
    np.testing.assert_allclose(s.max(0).numpy(), np.broadcast_to(x.max(0), (5, 3)))


def test_a_data_parallel_conv_takes_an_adam_step():
    w, b, img = f32(4, 3, 3, 3), f32(4), f32(2, 3, 8, 8)
    conv = nn.Conv2d(3, 4, 3)
    conv.weight, conv.bias = Tensor(w), Tensor(b)
    for p in get_parameters(conv):
        p.shard_(D2)
    opt = Adam(get_parameters(conv), lr=0.01)
    out = conv(Tensor(img).shard(D2, axis=0))
    opt.zero_grad()
    out.mean().backward()
    opt.step()
    # out.mean() sends 1/n to every output: the bias gradient is 1/(4) per channel, Adam's first step is lr * sign
    np.testing.assert_allclose(conv.bias.numpy(), b - 0.01, rtol=1e-5, atol=1e-6)
    assert conv.weight.device == D2 and np.isfinite(conv.weight.numpy()).all()


# ---------------------------------------------------------------- a shrink across the shard axis


@pytest.mark.parametrize("begin,end", [(2, 4), (1, 3), (3, 8), (0, 1), (0, 8)])
def test_a_shrink_of_the_shard_axis_is_replicated(begin, end):
    x = np.arange(64).reshape(8, 8)
    t = Tensor(x).contiguous().realize().shard(D4, axis=0)
    part = t[begin:end]
    assert part.device == D4 and part.axis == (0 if (begin, end) == (0, 8) else None)
    np.testing.assert_array_equal(part.numpy(), x[begin:end])
    np.testing.assert_array_equal((part * 2 + 1).sum(0).numpy(), (x[begin:end] * 2 + 1).sum(0))
    np.testing.assert_array_equal(part.pad(((begin, 8 - end), None)).numpy(),
                                  np.pad(x[begin:end], ((begin, 8 - end), (0, 0))))


def test_a_shrink_of_the_shard_axis_of_a_bool_and_its_gradient():
    x = f32(8, 3)
    np.testing.assert_array_equal((Tensor(x).shard(D4, axis=0) > 0)[1:6].numpy(), x[1:6] > 0)
    empty = Tensor(x).shard(D4, axis=0)[2:2]
    assert empty.shape == (0, 3) and (empty + 1).sum(0).numpy().tolist() == [0, 0, 0]
    m = Tensor(x).shard(D2, axis=0)
    m.requires_grad = True
    (m[1:5] * 2).sum().backward()
    want = np.zeros_like(x)
    want[1:5] = 2
    np.testing.assert_array_equal(m.grad.numpy(), want)


def test_setitem_across_shards_and_per_shard_batchnorm():
    t = Tensor.arange(16).contiguous().realize().shard(D4, axis=0)
    t[2:6] = 99
    t[13] = -1
    assert t.tolist() == [0, 1, 99, 99, 99, 99, 6, 7, 8, 9, 10, 11, 12, -1, 14, 15]
    x = f32(8, 4, 5, 5)
    xs = Tensor(x).shard(D4, axis=0)
    bns = [nn.BatchNorm2d(4) for _ in range(4)]
    for p in get_parameters(bns):
        p.shard_(D4)
    with Context(TRAINING=1):
        got = Tensor.cat(*[bn(xs[2 * i:2 * i + 2]) for i, bn in enumerate(bns)]).numpy()
    for i in range(4):
        c = x[2 * i:2 * i + 2]
        m, v = c.mean((0, 2, 3), keepdims=True), c.var((0, 2, 3), keepdims=True)
        np.testing.assert_allclose(got[2 * i:2 * i + 2], (c - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-4)


def test_a_symbolic_shrink_of_the_shard_axis_is_a_clear_error():
    from rulec.runtime.ir.uop import UOp
    t = Tensor(f32(8, 2)).shard(D2, axis=0)
    v = UOp.variable("v", 1, 4).bind(2)
    with pytest.raises(MultiDeviceError, match="symbolic"):
        t[v:v + 2]


# ---------------------------------------------------------------- operands sharded on different axes


@pytest.mark.parametrize("sx", [None, 0, 1])
@pytest.mark.parametrize("sw", [None, 0, 1])
def test_matmul_of_every_pair_of_layouts(sx, sw):
    x, w = f32(8, 8), f32(8, 8)
    out = Tensor(x).shard(D2, sx) @ Tensor(w).shard(D2, sw)
    np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose((out.to("CPU") @ Tensor(w)).numpy(), x @ w @ w, rtol=1e-4, atol=1e-4)


def test_elementwise_of_two_shard_axes_takes_the_last_and_assign_still_refuses():
    x, y = f32(4, 6), f32(4, 6)
    s = Tensor(x).shard(D2, 0) + Tensor(y).shard(D2, 1)
    assert s.axis == 1
    np.testing.assert_allclose(s.numpy(), x + y, rtol=1e-6)
    with pytest.raises(MultiDeviceError, match="different axes"):
        Tensor(x).shard(D2, 0).realize().assign(Tensor(y).shard(D2, 1))


# ---------------------------------------------------------------- BatchNorm of integers


def test_batchnorm_of_an_integer_input_keeps_float_statistics():
    # the batch mean was cast back to int32: every output off by the truncated fraction
    x = np.arange(4096).reshape(8, 8, 8, 8)[:2]
    m, v = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    with Context(TRAINING=1):
        got = nn.BatchNorm2d(8)(Tensor(x.astype(np.int32))).numpy()
    np.testing.assert_allclose(got, (x - m) / np.sqrt(v + 1e-5), atol=1e-5)


# ---------------------------------------------------------------- random values, shard_like, replace


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_random_tensors_like_a_multi_device_one_are_laid_out_as_it(axis):
    t = Tensor.empty(16, 16).shard(D2, axis=axis)
    for r in (t.rand_like(), t.randn_like(), Tensor.empty(16, 16, dtype="int32").shard(D2, axis).rand_like(dtype="float32")):
        assert (r.shape, r.device, r.axis) == ((16, 16), D2, axis)
        assert len(np.unique(r.numpy())) == 256
    v = t.rand_like().numpy()
    assert v.min() >= 0 and v.max() < 1
    with pytest.raises(ValueError, match="cannot be put on"):
        t.rand_like(device=("CPU:3", "CPU:4"))


@pytest.mark.parametrize("axis", [None, 0])
def test_dropout_of_a_multi_device_tensor(axis):
    with Context(TRAINING=1):
        out = Tensor.ones(512).shard(D2, axis=axis).dropout(0.5)
        assert out.axis == axis
        vals, counts = np.unique(out.numpy(), return_counts=True)
    assert vals.tolist() == [0.0, 2.0] and 180 < counts[0] < 332


def test_shard_like_and_replace():
    x = Tensor.ones(8).shard(D2, 0)
    y = Tensor.arange(8).float().shard_like(x)
    assert (y.device, y.axis) == (D2, 0) and y.numpy().tolist() == list(range(8))
    assert Tensor.zeros(8).shard_like(Tensor.ones(8).shard(D2)).axis is None
    assert Tensor.zeros(8).shard_like(Tensor.ones(8, device="CPU:3")).device == "CPU:3"
    assert y.shard_like(x) is y
    w = Tensor.zeros(8)
    assert w.replace(y) is w and w.device == D2 and w.numpy().tolist() == list(range(8))
    with pytest.raises(ValueError, match="shape"):
        w.replace(Tensor.zeros(4))


# ---------------------------------------------------------------- contiguous views of multi-device storage


@pytest.mark.parametrize("shape,axis,view", [((6, 4), 1, lambda t: t[1:4]), ((8, 6), 1, lambda t: t.reshape(4, 2, 6)[1]),
                                             ((10, 8), 1, lambda t: t[2:8][1:4]), ((8, 4, 10), 1, lambda t: t[3]),
                                             ((8, 4), None, lambda t: t[2:4])])
def test_contiguous_of_a_contiguous_view_of_sharded_storage_runs_no_kernel(shape, axis, view):
    # as on one device (and tinygrad's sub-buffers): each part's view is one run of its buffer
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    m = Tensor(x).clone().shard(D2, axis=axis).realize()
    c = view(m).contiguous()
    assert [i for i in c.schedule() if not i.is_copy] == []
    np.testing.assert_array_equal(c.numpy(), view(x))


def test_contiguous_of_other_views_of_sharded_storage_still_gets_buffers():
    x = np.arange(32, dtype=np.int32).reshape(8, 4)
    m = Tensor(x).clone().shard(D2, axis=0).realize()
    for view in (lambda t: t[:, 1:3], lambda t: t[2:4], lambda t: t.T):
        c = view(m).contiguous()
        assert len([i for i in c.schedule() if not i.is_copy]) == 2
        np.testing.assert_array_equal(c.numpy(), view(x))
    v = Tensor(x).clone().shard(D2, axis=1).realize()
    w = v[1:3].contiguous()  # a view: an assign through it writes the storage, as on one device
    w.assign(w * 0 + 7).realize()
    want = x.copy()
    want[1:3] = 7
    np.testing.assert_array_equal(v.numpy(), want)


# ---------------------------------------------------------------- a bitcast to a dtype of another size


@pytest.mark.parametrize("src,dst", [(np.uint8, np.uint16), (np.float32, np.uint8), (np.float32, np.float64),
                                     (np.float64, np.int16), (np.int8, np.float32), (np.float16, np.int32),
                                     (np.int64, np.float16)])
def test_a_bitcast_to_another_size_rescales_the_last_axis(src, dst):
    # a view of a sub-buffer read as wider values (tinygrad's sub-buffer cast) was "needs dtypes of one size"
    x = rng.integers(-(2 ** 15), 2 ** 15, (3, 8)).astype(src) if np.dtype(src).kind in "iu" else f32(3, 8).astype(src)
    got = Tensor(x).bitcast(np.dtype(dst).name).numpy()
    want = x.view(dst)
    assert got.shape == want.shape and got.view(np.uint8).tolist() == want.view(np.uint8).tolist()


def test_a_bitcast_of_a_view_and_of_a_sharded_tensor_and_its_errors():
    t = Tensor.arange(0, 10, dtype="uint8").realize()
    assert t[2:6].bitcast("uint16").tolist() == np.arange(10, dtype=np.uint8)[2:6].view(np.uint16).tolist()
    x = np.arange(16, dtype=np.uint8).reshape(2, 8)
    m = Tensor(x).shard(D2, axis=0).bitcast("uint32")
    assert m.axis == 0 and m.numpy().tolist() == x.view(np.uint32).tolist()
    with pytest.raises(ValueError, match=r"uint8 to uint16 needs a last axis .* shape \(3,\)"):
        Tensor(np.zeros(3, np.uint8)).bitcast("uint16")
    with pytest.raises(ValueError, match="no such regrouping"):
        Tensor(np.zeros(4, np.bool_)).bitcast("uint32")
