"""Tensor programs in the style of tinygrad's test_tensor, test_dtype, test_gradient and test_randomness
(creation, casts and bitcasts, gradients, random ranges), each checked against numpy. The programs are
our own; numpy computes every expected value."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, dtypes

RNG = np.random.default_rng(11)


# ------------------------------------------------------------------ kernels that compile

def test_min_of_an_empty_tensor_is_inf():
    # min is -max(-x): the negated -inf literal must render as -(-INFINITY), not the C decrement `--INFINITY`
    assert Tensor([]).min().numpy() == np.inf
    assert Tensor([]).max().numpy() == -np.inf
    np.testing.assert_array_equal(Tensor(np.full((2, 0), 1, np.float32)).min(axis=1).numpy(), [np.inf, np.inf])


def test_negating_a_negative_infinity_constant():
    x = Tensor([1.0, 2.0])
    np.testing.assert_array_equal((-(x * 0 + float("-inf"))).numpy(), [np.inf, np.inf])


# ------------------------------------------------------------------ creation

def test_tensor_of_none_is_a_zero_float():
    t = Tensor(None)
    assert t.shape == () and t.dtype == dtypes.float32
    assert t.numpy().shape == () and t.item() == 0.0
    assert Tensor(None, dtype=dtypes.int32).numpy().dtype == np.int32


def test_tensor_of_bytes_is_uint8():
    t = Tensor(b"abc123")
    assert t.dtype == dtypes.uint8 and t.shape == (6,)
    np.testing.assert_array_equal(t.numpy(), np.frombuffer(b"abc123", np.uint8))
    np.testing.assert_array_equal(Tensor(bytearray(b"\x01\xff"), dtype=dtypes.int32).numpy(), [1, 255])


# ------------------------------------------------------------------ matmul dtypes

@pytest.mark.parametrize("a, b", [("int8", "int8"), ("int8", "uint8"), ("uint8", "uint16"), ("int16", "int8"),
                                  ("bool", "bool"), ("float16", "float16")])
def test_matmul_keeps_the_promoted_dtype_of_its_operands(a, b):
    x = np.array([[100, 2], [3, 4]]).astype(a)
    y = np.array([[5, 100], [7, 8]]).astype(b)
    got = Tensor(x) @ Tensor(y)
    want = x @ y
    assert np.dtype(got.dtype.name if got.dtype != dtypes.bool else "bool") == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


# ------------------------------------------------------------------ bitcast between sizes

@pytest.mark.parametrize("src", ["int8", "uint8", "int16", "uint16", "float16", "int32", "float32", "int64",
                                 "uint64", "float64"])
@pytest.mark.parametrize("dst", ["uint8", "int16", "float16", "int32", "uint32", "float32", "int64", "float64"])
def test_bitcast_between_sizes_matches_numpy_view(src, dst):
    raw = RNG.integers(0, 256, size=48, dtype=np.uint8)
    if np.dtype(src).kind == "f":  # keep finite values: a NaN's payload is not compared by value
        raw = np.arange(48, dtype=np.uint8) % 60
    x = raw.view(src).reshape(2, -1)
    got = Tensor(x).bitcast(getattr(dtypes, dst))
    want = x.view(dst)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy().view(np.uint8), want.view(np.uint8))


def test_bitcast_int8_pairs_to_int16():
    x = np.array([72, -90, 27, 40, -53, 70, 96, 51], np.int8)
    assert Tensor(x).bitcast(dtypes.int16).tolist() == x.view(np.int16).tolist()


def test_bitcast_of_a_computed_value_between_sizes():
    x = Tensor.arange(8, dtype=dtypes.int32) + 0x01020304
    np.testing.assert_array_equal(x.bitcast(dtypes.uint8).numpy(), (np.arange(8, dtype=np.int32) + 0x01020304).view(np.uint8))


def test_bitcast_that_does_not_divide_the_last_axis_raises():
    with pytest.raises(RuntimeError, match="bitcast"):
        Tensor.empty((3,), dtype=dtypes.int8).bitcast(dtypes.float16)
    with pytest.raises(ValueError, match="bitcast"):
        Tensor(np.int32(5)).bitcast(dtypes.int8)


# ------------------------------------------------------------------ gradients

def test_max_gradient_with_many_float16_ties_shares_one():
    # 70000 tied maxima: a float16 count stops at 2048 and would give each tie 1/2048
    t = Tensor.ones(70000, dtype=dtypes.float16).contiguous()
    g = t.max().gradient(t)[0]
    assert g.dtype == dtypes.float16
    np.testing.assert_allclose(g.float().sum().numpy(), 1.0, atol=2e-3)


def test_gradient_of_a_scalar_given_as_one_element():
    x = Tensor([1.0, 2.0, 3.0])
    assert (x * x).sum().gradient(x, gradient=Tensor([3.0]))[0].tolist() == [6.0, 12.0, 18.0]
    with pytest.raises(ValueError, match="gradient of shape"):
        (x * x).sum().gradient(x, gradient=Tensor([3.0, 1.0]))


def test_log_softmax_backward_needs_no_reduce_through_the_max():
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
    x, w = Tensor(xv).realize(), Tensor(wv).realize()
    x.requires_grad = True
    w.requires_grad = True
    x.dot(w).relu().log_softmax().sum().backward()
    assert len(Tensor.schedule(x.grad, w.grad)) <= 5  # tinygrad 0.14: 5
    h = np.maximum(xv @ wv, 0)
    p = np.exp(h - h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    gh = (1 - 3 * p) * (h > 0)  # d/dh of sum(log_softmax(h)) through the relu
    np.testing.assert_allclose(x.grad.numpy(), gh @ wv.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), xv.T @ gh, rtol=1e-4, atol=1e-5)


def test_softmax_gradient_with_tied_maxima():
    x = Tensor([[2.0, 2.0, 1.0]])
    x.requires_grad = True
    (x.softmax() * Tensor([[1.0, 0.0, 0.0]])).sum().backward()
    p = np.exp([2.0, 2.0, 1.0]) / np.exp([2.0, 2.0, 1.0]).sum()
    want = p[0] * (np.eye(3)[0] - p)
    np.testing.assert_allclose(x.grad.numpy()[0], want, rtol=1e-5)


# ------------------------------------------------------------------ random ranges

@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_rand_in_narrow_floats_stays_below_one(dt):
    Tensor.manual_seed(0)
    x = Tensor.rand(2, 128, 128, dtype=getattr(dtypes, dt))
    assert x.dtype == getattr(dtypes, dt)
    v = x.numpy()
    assert (v >= 0).all() and (v < 1).all()
    if dt != "float32":  # 32768 draws on a grid of 2048 (or 256) steps land on 0 too
        assert (v == 0).any()
    assert abs(float(v.astype(np.float64).mean()) - 0.5) < 0.01


# ------------------------------------------------------------------ linear algebra

def _orthonormal(a: np.ndarray, tol: float = 1e-4) -> bool:
    eye = np.broadcast_to(np.eye(a.shape[-2], dtype=a.dtype), a.shape[:-2] + (a.shape[-2], a.shape[-2]))
    return np.allclose(a @ np.swapaxes(a, -2, -1), eye, atol=tol, rtol=tol)


@pytest.mark.parametrize("shape", [(3, 3), (3, 6), (6, 3), (2, 2, 2, 2)])
def test_qr_is_orthogonal_times_upper_triangular(shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    Q, R = Tensor(a).qr()
    q, r = Q.numpy(), R.numpy()
    assert q.shape == shape[:-1] + (shape[-2],) and r.shape == shape
    assert _orthonormal(q)
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-5)
    np.testing.assert_allclose(q @ r, a, atol=1e-4)


def test_qr_of_a_zero_column_has_no_nan():
    a = np.array([[0.0, 1.0], [0.0, 2.0]], np.float32)
    Q, R = Tensor(a).qr()
    assert not np.isnan(Q.numpy()).any() and not np.isnan(R.numpy()).any()
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), a, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (5, 3), (3, 5), (3, 4, 4), (2, 1, 2, 3)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs_with_numpys_singular_values(shape, full):
    a = RNG.standard_normal(shape).astype(np.float32)
    U, S, Vh = Tensor(a).svd(full_matrices=full)
    u, s, vh = U.numpy(), S.numpy(), Vh.numpy()
    wu, ws, wvh = np.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (wu.shape, ws.shape, wvh.shape)
    np.testing.assert_allclose(s, ws, atol=1e-4)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-4)
    if full:
        assert _orthonormal(u) and _orthonormal(vh)


@pytest.mark.parametrize("a, want_s", [(np.eye(2), [1, 1]), (np.zeros((2, 2)), [0, 0]), (np.eye(4), [1, 1, 1, 1]),
                                       ([[1.0, 1.0], [2.0, 2.0]], [np.sqrt(10), 0.0])])
def test_svd_of_degenerate_matrices(a, want_s):
    a = np.asarray(a, np.float32)
    U, S, Vh = Tensor(a).svd()
    u, s, vh = U.numpy(), S.numpy(), Vh.numpy()
    assert not (np.isnan(u).any() or np.isnan(s).any() or np.isnan(vh).any())
    np.testing.assert_allclose(s, want_s, atol=1e-4)
    np.testing.assert_allclose(u @ np.diag(s) @ vh, a, atol=1e-4)


@pytest.mark.parametrize("params", [(2, -1.5, 0.5), (2.0, -1.4, 0.2, 0.2)])
@pytest.mark.parametrize("shape", [(2, 2), (3, 2), (2, 3), (2, 2, 2)])
def test_newton_schulz_orthogonalizes(params, shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    g = Tensor(a).newton_schulz(steps=20, params=params, eps=0.0).numpy()
    assert g.shape == shape
    assert _orthonormal(g if shape[-1] > shape[-2] else np.swapaxes(g, -2, -1), tol=1e-3)


def test_factorizations_need_a_matrix():
    for f in (lambda t: t.qr(), lambda t: t.svd(), lambda t: t.newton_schulz(2, (2, -1.5, 0.5))):
        with pytest.raises(ValueError, match=r"\(3,\)"):
            f(Tensor([1.0, 2.0, 3.0]))


# ------------------------------------------------------------------ bfloat16 on the C backend

def _bf16(x) -> np.ndarray:
    """numpy's float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def test_cast_to_bfloat16_rounds_in_a_kernel():
    vals = np.array([10000, -1, -1000, -10000, 20, 60000, 70000, 80000, 100000], np.float32)
    got = Tensor(vals).cast(dtypes.bfloat16).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(got, _bf16(vals))
    assert got[0] == 9984.0


def test_float16_to_bfloat16_keeps_specials():
    h = np.array([1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 6.1035e-5], np.float16)
    got = Tensor(h).cast(dtypes.bfloat16).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(got, _bf16(h.astype(np.float32)))


def test_bfloat16_arithmetic_rounds_each_result():
    a = np.array([1.5, 2.25, -3.0, 1.001, 3.3], np.float32)
    t = Tensor(a, dtype=dtypes.bfloat16)
    np.testing.assert_array_equal(t.numpy(), _bf16(a))  # host data rounds too
    for got, want in [((t * t), _bf16(_bf16(a) * _bf16(a))), ((t / 3), _bf16(_bf16(a) / np.float32(3))),
                      (t.exp(), None)]:
        assert got.dtype == dtypes.bfloat16
        v = got.numpy()
        np.testing.assert_array_equal(v, _bf16(v))  # every value a bfloat16
        if want is not None:
            np.testing.assert_array_equal(v, want)
