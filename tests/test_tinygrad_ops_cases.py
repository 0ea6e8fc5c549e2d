"""Op calls in the style of tinygrad's test_ops (argument forms, edge shapes, error types), each checked
against numpy. The programs are our own; numpy computes every expected value."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor

RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-2, 2, size=shape).astype(np.float32)


# ------------------------------------------------------------------ div(rounding_mode=)

@pytest.mark.parametrize("num", [[9, -9, 4, 0, -1], [9.0, -9.0, 4.0, 0.0, -1.0]])
@pytest.mark.parametrize("den", [4, -4, 4.0, -2.5])
def test_div_rounding_modes_match_numpy(num, den):
    a = np.array(num)
    t = Tensor(num)
    exact = a / den
    np.testing.assert_allclose(t.div(den).numpy(), exact.astype(np.float32), rtol=1e-6)
    trunc, floor = t.div(den, rounding_mode="trunc").numpy(), t.div(den, rounding_mode="floor").numpy()
    np.testing.assert_array_equal(trunc, np.trunc(exact))
    np.testing.assert_array_equal(floor, np.floor(exact))
    both_int = isinstance(num[0], int) and isinstance(den, int)
    assert trunc.dtype == (np.int32 if both_int else np.float32)


def test_div_rounding_mode_with_tensor_divisor_and_reverse():
    a, b = np.array([7, -7, 8]), np.array([2, 2, -3])
    np.testing.assert_array_equal(Tensor(a).div(Tensor(b), rounding_mode="floor").numpy(), a // b)
    np.testing.assert_array_equal(Tensor(b).div(Tensor(a), reverse=True, rounding_mode="trunc").numpy(),
                                  np.trunc(a / b).astype(np.int32))


def test_div_unknown_rounding_mode_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="rounding_mode"):
        Tensor([5]).div(Tensor([2]), rounding_mode="round")


# ------------------------------------------------------------------ argument forms

def test_meshgrid_counts_a_0d_tensor_as_one_element():
    x, y = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0], np.float32)
    for indexing in ("ij", "xy"):
        got = Tensor(x).meshgrid(Tensor(7.0), Tensor(y), indexing=indexing)
        want = np.meshgrid(x, np.array([7.0], np.float32), y, indexing=indexing)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)


def test_stack_takes_one_sequence_of_tensors():
    a, b = rand(2, 3), rand(2, 3)
    np.testing.assert_array_equal(Tensor.stack((Tensor(a), Tensor(b)), dim=-1).numpy(), np.stack((a, b), -1))
    np.testing.assert_array_equal(Tensor.stack([Tensor(a), Tensor(b)]).numpy(), np.stack((a, b)))
    with pytest.raises(ValueError):
        Tensor.stack((Tensor(a), Tensor(b)), Tensor(a))


def test_squeeze_of_a_0d_tensor_takes_axis_0_or_minus_1():
    t = Tensor(2.5)
    assert t.squeeze(0).shape == () and t.squeeze(-1).shape == () and t.squeeze().shape == ()
    for bad in (1, -2):
        with pytest.raises(IndexError):
            t.squeeze(bad)


def test_linspace_refuses_bool():
    with pytest.raises(ValueError):
        Tensor.linspace(0, 1, 3, dtype="bool")


def test_shape_given_as_a_tuple_and_integers_is_a_value_error():
    with pytest.raises(ValueError):
        Tensor.kaiming_normal((4, 3), 3)
    with pytest.raises(TypeError):  # still a TypeError too, as before
        Tensor.zeros((2, 2), 2)


def test_tuples_inside_an_index_select_like_lists():
    a = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    t = Tensor(a)
    np.testing.assert_array_equal(t[((0,),)].numpy(), a[[0]])
    np.testing.assert_array_equal(t[(1, 0), :, (2, 1)].numpy(), a[[1, 0], :, [2, 1]])
    np.testing.assert_array_equal(t[1, ((2,), (1,)), (0, 3)].numpy(), a[1, [[2], [1]], [0, 3]])


def test_einsum_ellipsis_axes_broadcast_right_aligned():
    a, b = rand(2, 3, 4, 5), rand(5, 2, 4)
    np.testing.assert_allclose(Tensor.einsum("i...j,ji...->...", Tensor(a), Tensor(b)).numpy(),
                               np.einsum("i...j,ji...->...", a, b), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ convolutions over 1 or 3 spatial axes

def conv_reference(x: np.ndarray, w: np.ndarray, stride: int = 1, groups: int = 1) -> np.ndarray:
    """Cross-correlation over the trailing axes, by looping over output positions."""
    nd = w.ndim - 2
    k = w.shape[2:]
    out_sz = tuple((x.shape[2 + i] - k[i]) // stride + 1 for i in range(nd))
    cg, og = w.shape[1], w.shape[0] // groups
    out = np.zeros((x.shape[0], w.shape[0]) + out_sz, np.float32)
    for pos in np.ndindex(*out_sz):
        win = tuple(slice(p * stride, p * stride + kk) for p, kk in zip(pos, k))
        for g in range(groups):
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + win]
            wg = w[g * og:(g + 1) * og]
            out[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.tensordot(patch, wg, axes=(
                list(range(1, 2 + nd)), list(range(1, 2 + nd))))
    return out


def test_conv2d_takes_1d_inputs_with_torch_style_padding():
    x, w, b = rand(2, 3, 11), rand(6, 1, 5), rand(6)
    got = Tensor(x).conv2d(Tensor(w), Tensor(b), groups=3, padding=(2, 1), stride=2).numpy()
    want = conv_reference(np.pad(x, ((0, 0), (0, 0), (2, 1))), w, stride=2, groups=3) + b[None, :, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv2d_takes_3d_inputs_and_per_axis_padding():
    x, w = rand(1, 2, 4, 5, 3), rand(3, 2, 2, 3, 2)
    got = Tensor(x).conv2d(Tensor(w), padding=[1, 1, 0, 2, 1, 0]).numpy()  # last axis first, as torch's pad
    want = conv_reference(np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2), (1, 1))), w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv2d_gradient_over_1d():
    x, w = rand(1, 2, 7), rand(3, 2, 3)
    tx, tw = Tensor(x), Tensor(w)
    gx, gw = tx.conv2d(tw).sum().gradient(tx, tw)
    # d(sum)/dw[o,c,k] = sum over positions of x[c, p+k]; d/dx[c,i] = sum of w[:, c, k] over windows covering i
    want_gw = np.stack([x[0, :, k:k + 5].sum(-1) for k in range(3)], -1)[None].repeat(3, 0)
    want_gx = np.zeros_like(x)
    for p in range(5):
        want_gx[0, :, p:p + 3] += w.sum(0)
    np.testing.assert_allclose(gw.numpy(), want_gw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda x, w: x.conv2d(w, groups=2),                 # channels do not split into the groups
    lambda x, w: x.conv2d(w, padding=(1, 1, 1)),        # neither one per axis nor pairs
    lambda x, w: x.conv2d(w, dilation=4),               # dilated kernel larger than the input
])
def test_conv2d_bad_arguments_are_runtime_and_value_errors(call):
    x, w = Tensor(rand(1, 3, 6, 6)), Tensor(rand(4, 3, 3, 3))
    with pytest.raises(RuntimeError):
        call(x, w)
    with pytest.raises(ValueError):
        call(x, w)


def test_conv_transpose2d_over_1d_is_the_adjoint_of_conv():
    # <conv(x, w), y> == <x, conv_transpose(y, w)> for every x, y
    x, w, y = rand(1, 2, 9), rand(3, 2, 3), rand(1, 3, 4)
    cx = Tensor(x).conv2d(Tensor(w), stride=2).numpy()
    ty = Tensor(y).conv_transpose2d(Tensor(w), stride=2).numpy()
    assert ty.shape == x.shape
    np.testing.assert_allclose((cx * y).sum(), (x * ty).sum(), rtol=1e-4)


# ------------------------------------------------------------------ error types a torch-style test expects

@pytest.mark.parametrize("call", [
    lambda: Tensor.ones(3, 4).permute((0, 0)),
    lambda: Tensor.ones(3, 4).reshape((-1, -1, 2)),
    lambda: Tensor.ones(3, 4).flip((1, -1)),
    lambda: Tensor.ones(3, 3).diagonal(dim1=0, dim2=0),
    lambda: Tensor.ones(3, 3).roll(shifts=1, dims=(0, 1)),
    lambda: Tensor.ones(4).clip(None, None),
    lambda: Tensor.ones(4) @ Tensor.ones(1, 2),
    lambda: Tensor.ones(8).unfold(0, 9, 3),
    lambda: Tensor([1, 2]).meshgrid(indexing="ji"),
    lambda: Tensor([2, 3]) ** -2,
    lambda: Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2)),
    lambda: Tensor.ones(4, 5).gather(0, Tensor([[1] * 6])),
    lambda: Tensor.ones(3, 4).cross_entropy(Tensor.ones(3, 1)),
])
def test_bad_arguments_raise_runtime_errors_that_are_still_value_errors(call):
    with pytest.raises(RuntimeError):
        call()
    with pytest.raises(ValueError):
        call()


def test_bitwise_op_on_floats_is_a_runtime_error_and_a_type_error():
    for call in (lambda: Tensor([1.5]) & Tensor([2.5]), lambda: ~Tensor([1.5])):
        with pytest.raises(RuntimeError):
            call()
        with pytest.raises(TypeError):
            call()


@pytest.mark.parametrize("index", [lambda: Tensor(1.5), lambda: [1.5], lambda: Tensor([True, False]), lambda: [True, False]])
def test_float_or_bool_index_is_an_index_error(index):
    with pytest.raises(IndexError):
        Tensor.ones(4, 3)[index()]


def test_unknown_pad_mode_is_not_implemented():
    with pytest.raises(NotImplementedError):
        Tensor.ones(3, 3).pad((1, 1), mode="wrap")


def test_empty_dtype_name_in_a_reduction_is_an_attribute_error():
    for call in (lambda: Tensor([1.0, 2.0]).sum(dtype=""), lambda: Tensor([1.0, 2.0]).prod(dtype="")):
        with pytest.raises(AttributeError):
            call()


def test_cumulative_extremes_of_a_0d_tensor_check_the_axis():
    t = Tensor(3.0)
    assert t.cummax(0)[0].item() == 3.0 and t.cummin(-1)[1].item() == 0
    with pytest.raises(IndexError):
        t.cummax(1)


# ------------------------------------------------------------------ values and gradients

def test_copysign_gradient_flows_to_self():
    v = np.array([-1.0, -0.0, 0.0, 1.0, 2.5, -3.0], np.float32)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    ta = Tensor(a)
    out = ta.copysign(Tensor(b))
    (g,) = out.sum().gradient(ta)
    # d/da copysign(a, b) = sign(a) * (+1 or -1 by b's sign bit): 0 at a zero
    want = np.where(a == 0, 0.0, np.where(np.signbit(a) == np.signbit(b), 1.0, -1.0))
    np.testing.assert_array_equal(g.numpy(), want.astype(np.float32))
    got = out.numpy()
    np.testing.assert_array_equal(got.view(np.int32), np.copysign(a, b).view(np.int32))  # sign bits too


def test_copysign_keeps_nan_and_zero_sign_bits():
    v = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0], np.float32)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    got = Tensor(a).copysign(Tensor(b)).numpy()
    np.testing.assert_array_equal(got.view(np.int32), np.copysign(a, b).view(np.int32))


def test_max_pool2d_indices_are_int32_flat_positions():
    x = rand(2, 3, 6, 6)
    out, idx = Tensor(x).max_pool2d(kernel_size=(2, 2), return_indices=True)
    assert idx.numpy().dtype == np.int32
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), -1).reshape(out.shape),
                                  out.numpy())


def test_uint8_lerp_with_a_weight_tensor_rounds():
    a = np.array([10, 10, 200, 0, 7], np.uint8)
    b = np.array([13, 7, 0, 255, 7], np.uint8)
    w = np.array([0.5, 0.5, 0.25, 0.9, 0.3], np.float32)
    got = Tensor(a).lerp(Tensor(b), Tensor(w)).numpy()
    wq = np.floor(w * 128 + 0.5)  # the weight in 1/128ths
    want = a.astype(np.int64) + np.floor(((b.astype(np.int64) - a) * wq + 64) / 128).astype(np.int64)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, a + (b.astype(np.float32) - a) * w, atol=1.0)  # within one of the exact value


def resize_uint8_last_axis(x: np.ndarray, out: int) -> np.ndarray:
    """Half-pixel linear resize of the last axis in fixed point: weights in 1/128ths, rounded."""
    n = x.shape[-1]
    src = np.maximum((np.arange(out) + 0.5) * n / out - 0.5, 0)
    lo = np.minimum(np.floor(src), n - 1).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    wq = np.floor((src - lo) * 128 + 0.5)
    a, b = x[..., lo].astype(np.int64), x[..., hi].astype(np.int64)
    return (a + np.floor(((b - a) * wq + 64) / 128)).astype(np.uint8)


def test_uint8_linear_interpolate_rounds_one_axis_at_a_time_last_first():
    x = ((np.arange(2 * 3 * 9 * 7) * 37) % 50).reshape(2, 3, 9, 7).astype(np.uint8)
    got = Tensor(x).interpolate(size=(4, 11), mode="linear").numpy()
    want = resize_uint8_last_axis(resize_uint8_last_axis(x, 11).swapaxes(-1, -2), 4).swapaxes(-1, -2)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
