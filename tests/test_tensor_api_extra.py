"""Tensor API still missing after test_tensor_api_more.py (issue 11 §3): `__setitem__`, masked_select and
nonzero, inverse trigonometric / hyperbolic / bitwise functions, scans, shape helpers, random creation,
scatter_reduce, max_unpool2d, conv_transpose2d and clip's gradient at its bounds. numpy is the oracle;
values go through the whole pipeline (`numpy()`) and the graph evaluator (`lazy_numpy()`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.tensor.tensor import Tensor

from tests.test_tensor_api_more import check, data, only_tensor_ops

RNG = np.random.default_rng(12)


def stored(a: np.ndarray) -> Tensor:
    return Tensor(np.array(a)).realize()


# ---------------------------------------------------------------------------------------- __setitem__

SET_KEYS = [
    ((5, 6), 1, lambda s: 5.0),
    ((5, 6), -1, lambda s: data(*s)),
    ((5, 6), (slice(None, None, 2), slice(1, 5)), lambda s: data(*s)),
    ((5, 6), (1, slice(None, None, -1)), lambda s: data(*s)),
    ((5, 6), (slice(4, 0, -2), slice(None, None, 3)), lambda s: data(*s)),
    ((5, 6), (slice(2, 2), 0), lambda s: 1.0),
    ((5, 6), (Ellipsis, None, 1), lambda s: data(*s)),
    ((5, 6), (slice(None), slice(1, 3)), lambda s: data(s[-1])),  # broadcast along rows
    ((5, 6), ([0, 2], 1), lambda s: data(*s)),
    ((5, 6), (slice(None), [0, 0]), lambda s: data(*s)),  # a repeated index: the last write wins
    ((5, 6), ([0, 2], [1, -3]), lambda s: 9.0),
    ((5, 6), (slice(1, 3), [0, 2, 5]), lambda s: data(*s)),
    ((5, 6), ([[0], [2]],), lambda s: data(*s)),
    ((3, 4, 5), (1, slice(None), [0, 1]), lambda s: data(*s)),
    ((3, 4, 5), ([0, 1], slice(None), [0, 1]), lambda s: data(*s)),
    ((3, 4, 5), (slice(None), [0, 1], [2, 3]), lambda s: data(*s)),
    ((3, 4, 5), (slice(None, None, 2), [3, 1], slice(1, None, 2)), lambda s: data(*s)),
    ((40, 3), (list(np.arange(30) % 7),), lambda s: data(*s)),  # many writes, repeated: the reduction path
    ((40, 3), (list(np.arange(30) % 7), [2, 0, 1] * 10), lambda s: data(*s)),
    ((5, 6), ([],), lambda s: 1.0),
]


def _np_key(key):
    return tuple(k.numpy() if isinstance(k, Tensor) else k for k in key) if isinstance(key, tuple) else key


@pytest.mark.parametrize("shape,key,value", SET_KEYS, ids=[str(k[1]) for k in SET_KEYS])
def test_setitem_matches_numpy(shape, key, value):
    a = data(*shape)
    ref = a.copy()
    shape_at = ref[_np_key(key)].shape
    v = value(shape_at)
    ref[_np_key(key)] = v
    t = stored(a)
    t[key] = Tensor(v) if isinstance(v, np.ndarray) else v
    assert t.uop.op is Ops.ASSIGN  # a realized tensor is written in place
    only_tensor_ops(t)
    check(t, ref)


def test_setitem_tensor_index_and_int_dtypes():
    a = RNG.integers(-50, 50, size=(6, 4)).astype(np.int32)
    ref = a.copy()
    ref[np.array([4, 1]), 2] = 7
    ref[1:3] = np.array([1, 2, 3, 4])
    t = stored(a)
    t[Tensor([4, 1]), 2] = 7
    t[1:3] = [1, 2, 3, 4]  # Python data is converted to the tensor's dtype
    check(t, ref)
    t[0] = 2.9  # a float scalar into an int tensor is truncated (tinygrad's)
    ref[0] = 2
    check(t, ref)


def test_setitem_views_and_aliases():
    base = stored(np.zeros((3, 4), np.float32))
    alias = base
    row = base[1]
    row[2] = 5.0  # through a view: the base sees it
    base[0, ::2] = Tensor(np.array([1.0, 2.0], np.float32))
    assert alias is base
    ref = np.zeros((3, 4), np.float32)
    ref[1, 2] = 5
    ref[0, ::2] = [1, 2]
    check(base, ref, lazy=False)


def test_setitem_on_computed_tensor_replaces_it():
    # a constant or computed tensor has no buffer: it becomes the updated value (tinygrad 0.14's result)
    z = Tensor.zeros(3, 4)
    z[1] = 5.0
    ar = Tensor.arange(12).reshape(3, 4)
    ar[:, [0, 3]] = -1
    ref_z = np.zeros((3, 4), np.float32)
    ref_z[1] = 5
    ref_a = np.arange(12, dtype=np.int32).reshape(3, 4)
    ref_a[:, [0, 3]] = -1
    check(z, ref_z)
    check(ar, ref_a)
    assert z.uop.op is not Ops.ASSIGN


def test_setitem_errors():
    t = stored(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="int32 tensor"):
        t[0] = Tensor([1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        t[0] = Tensor(np.ones(3, np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        t[3] = 1.0
    with pytest.raises(TypeError, match="bool masks"):
        t[Tensor([True, False, True])] = 1.0


@pytest.mark.parametrize("name,tinygrad,build", [
    ("setitem_row", 1, lambda t: t.__setitem__(1, 5.0)),
    ("setitem_stepped", 1, lambda t: t.__setitem__((slice(None, None, 2), slice(1, 7, 3)), 2.0)),
    ("setitem_tensor_index", 1, lambda t: t.__setitem__(Tensor([1, 5]), 3.0)),
    ("setitem_two_tensor_indices", 1, lambda t: t.__setitem__((Tensor([1, 5]), Tensor([0, 2])), 3.0)),
])
def test_setitem_kernel_counts_at_most_tinygrads(name, tinygrad, build):
    t = stored(data(8, 8))
    build(t)
    assert len(t.schedule()) <= tinygrad


# ---------------------------------------------------------------------------------------- mask selection

def test_masked_select_and_nonzero():
    a = RNG.integers(0, 3, size=(4, 5)).astype(np.int32)
    m = RNG.random((4, 5)) < 0.5
    check(stored(a).masked_select(Tensor(m)), a[m], lazy=False)
    row = np.array([True, False, True, True, False])
    check(stored(a).masked_select(Tensor(row)), a[np.broadcast_to(row, a.shape)], lazy=False)
    fixed = np.full(8, -1, np.int32)
    fixed[:min(8, m.sum())] = a[m][:8]
    check(stored(a).masked_select(Tensor(m), size=8, fill_value=-1), fixed)
    check(stored(a).nonzero(), np.argwhere(a).astype(np.int32), lazy=False)
    check(stored(a[0]).nonzero(), np.argwhere(a[0]).astype(np.int32), lazy=False)
    padded = np.full((30, 2), -1, np.int32)
    padded[:np.count_nonzero(a)] = np.argwhere(a)
    check(stored(a).nonzero(size=30, fill_value=-1), padded)
    assert Tensor(3).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)
    with pytest.raises(TypeError, match="bool mask"):
        stored(a).masked_select(Tensor([1, 0, 1, 0, 1]))


# ---------------------------------------------------------------------------------------- elementwise

UNARY = [
    ("acos", np.arccos, (-1, 1)), ("asin", np.arcsin, (-1, 1)), ("atan", np.arctan, (-50, 50)),
    ("acosh", np.arccosh, (1, 50)), ("asinh", np.arcsinh, (-50, 50)), ("atanh", np.arctanh, (-0.99, 0.99)),
    ("cosh", np.cosh, (-8, 8)), ("sinh", np.sinh, (-8, 8)), ("log10", np.log10, (1e-3, 1e4)),
    ("quick_gelu", lambda x: x / (1 + np.exp(-1.702 * x)), (-6, 6)),
]


@pytest.mark.parametrize("name,ref,rng", UNARY, ids=[u[0] for u in UNARY])
def test_unary_math(name, ref, rng):
    x = np.concatenate([data(200, lo=rng[0], hi=rng[1]), np.array(rng, np.float32), np.zeros(1, np.float32)
                        if rng[0] <= 0 <= rng[1] else np.array([], np.float32)])
    t = getattr(Tensor(x), name)()
    only_tensor_ops(t)
    check(t, ref(x.astype(np.float64)).astype(np.float32), rtol=2e-5, atol=2e-6)


def test_unary_math_edges_and_ints():
    with np.errstate(all="ignore"):
        x = np.array([-2.0, -1.0, 1.0, 2.0, np.inf, -np.inf, np.nan, 1e-6, -1e-30], np.float32)
        for name, ref in [("acos", np.arccos), ("asin", np.arcsin), ("atan", np.arctan), ("atanh", np.arctanh),
                          ("asinh", np.arcsinh), ("acosh", np.arccosh)]:
            got = getattr(Tensor(x), name)().numpy()
            np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-5, atol=1e-7, err_msg=name)
    check(Tensor([1, 100, 1000]).log10(), np.array([0, 2, 3], np.float32))
    assert Tensor([0, 1]).acos().dtype == dtypes.float32


def test_copysign_fmod_lerp():
    a = np.array([1.0, -2.0, 0.0, 3.0, -0.0, np.inf], np.float32)
    b = np.array([-0.0, 1.0, -1.0, 0.0, 2.0, -3.0], np.float32)
    got = Tensor(a).copysign(Tensor(b)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.copysign(a, b)))
    check(Tensor(a).copysign(Tensor(b)), np.copysign(a, b))
    check(Tensor([-3, 0, 5]).copysign(-1), np.array([-3, 0, -5], np.int32))
    i, j = RNG.integers(-20, 20, 50).astype(np.int32), RNG.integers(1, 7, 50).astype(np.int32) * RNG.choice([-1, 1], 50)
    check(Tensor(i).fmod(Tensor(j.astype(np.int32))), np.fmod(i, j).astype(np.int32))
    f, g = data(50, lo=-10, hi=10), data(50, lo=0.5, hi=3)
    check(Tensor(f).fmod(Tensor(g)), np.fmod(f, g), atol=1e-5)
    check(Tensor(f).fmod(2.5), np.fmod(f, np.float32(2.5)), atol=1e-5)
    e, w = data(50), data(50, lo=0, hi=1)
    check(Tensor(f).lerp(Tensor(e), Tensor(w)), f + (e - f) * w, atol=1e-5)
    check(Tensor(f).lerp(Tensor(e), 0.25), f + (e - f) * 0.25, atol=1e-5)
    with pytest.raises(TypeError, match="bool"):
        Tensor([True]).fmod(Tensor([True]))


def test_softmin():
    x = data(4, 7)
    e = np.exp(-x - (-x).max(1, keepdims=True))
    check(Tensor(x).softmin(1), e / e.sum(1, keepdims=True))
    check(Tensor(x).softmin(), e / e.sum(-1, keepdims=True))


def test_bitwise_and_shifts():
    a, b = RNG.integers(-100, 100, 40).astype(np.int32), RNG.integers(-100, 100, 40).astype(np.int32)
    check(Tensor(a).bitwise_and(Tensor(b)), a & b)
    check(Tensor(a).bitwise_or(Tensor(b)), a | b)
    check(Tensor(a).bitwise_xor(Tensor(b)), a ^ b)
    check(Tensor(a).bitwise_xor(7, reverse=True), 7 ^ a)
    check(Tensor(a).bitwise_not(), ~a)
    check(Tensor([True, False]).bitwise_not(), np.array([False, True]))
    check(Tensor([True, False]).bitwise_and(True), np.array([True, False]))
    s = RNG.integers(0, 8, 40).astype(np.int32)
    check(Tensor(a).lshift(Tensor(s)), a << s)
    check(Tensor(a).rshift(Tensor(s)), a >> s)  # arithmetic for signed ints
    check(Tensor(a) << 3, a << 3)
    check(Tensor(a) >> 2, a >> 2)
    check(Tensor(s).rshift(256, reverse=True), 256 >> s)
    u = RNG.integers(0, 255, 20).astype(np.uint8)
    check(Tensor(u).rshift(1), u >> 1)
    with pytest.raises(TypeError, match="lshift needs integer"):
        Tensor([1.0]).lshift(1)
    with pytest.raises(TypeError, match="bitwise_and needs bool or integer"):
        Tensor([1.0]).bitwise_and(1)


def test_isclose_allclose():
    a = np.array([1.0, np.nan, np.inf, 1.0, -np.inf, 1e-9, 100.0], np.float32)
    b = np.array([1.000001, np.nan, np.inf, 2.0, np.inf, 0.0, 100.001], np.float32)
    check(Tensor(a).isclose(Tensor(b)), np.isclose(a, b))
    check(Tensor(a).isclose(Tensor(b), equal_nan=True), np.isclose(a, b, equal_nan=True))
    check(Tensor(a).isclose(Tensor(b), rtol=1e-3, atol=0.0), np.isclose(a, b, rtol=1e-3, atol=0.0))
    check(Tensor([1, 2]).isclose(Tensor([1, 3])), np.array([True, False]))
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-7])).item() is True
    assert Tensor(a).allclose(Tensor(b)).item() is False
    assert Tensor([1.0]).allclose(Tensor([1.0])).shape == ()


# ---------------------------------------------------------------------------------------- scans and reductions

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumprod_logcumsumexp(axis):
    x = data(4, 6, lo=-1.5, hi=1.5)
    check(Tensor(x).cumprod(axis), np.cumprod(x, axis), rtol=1e-5)
    i = RNG.integers(-3, 4, size=(4, 6)).astype(np.int32)
    check(Tensor(i).cumprod(axis), np.cumprod(i, axis).astype(np.int32))
    check(Tensor(x * 30).logcumsumexp(axis), np.logaddexp.accumulate((x * 30).astype(np.float64), axis), rtol=1e-5)


def test_scans_edges():
    x = np.array([-np.inf, -np.inf, 2.0, 3.0, -100.0], np.float32)
    with np.errstate(all="ignore"):
        check(Tensor(x).logcumsumexp(), np.logaddexp.accumulate(x.astype(np.float64)))
    check(Tensor([1, 2, 3]).logcumsumexp(), np.logaddexp.accumulate(np.array([1.0, 2, 3])).astype(np.float32))
    check(Tensor(np.array([1, 2, 3], np.int8)).cumprod(0), np.array([1, 2, 6], np.int8))
    check(Tensor(2.5).cumprod(0), np.float32(2.5))
    with pytest.raises(IndexError):
        Tensor(x).cumprod(1)


def test_std_var_mean_normalize():
    x = data(5, 6)
    s, m = Tensor(x).std_mean(1)
    check(s, x.std(1, ddof=1), rtol=1e-5)
    check(m, x.mean(1))
    v, m = Tensor(x).var_mean((0, 1), keepdim=True, correction=0)
    check(v, x.var(keepdims=True), rtol=1e-5)
    check(m, x.mean(keepdims=True))
    for p, dim in [(2.0, 1), (1.0, 0), (3.0, -1)]:
        norm = (np.abs(x) ** p).sum(dim, keepdims=True) ** (1 / p)
        check(Tensor(x).normalize(p, dim), x / np.maximum(norm, 1e-12), rtol=1e-5)
    check(Tensor([[0.0, 0.0], [3.0, 4.0]]).normalize(), np.array([[0, 0], [0.6, 0.8]], np.float32))
    check(Tensor([[3, 4]]).normalize(), np.array([[0.6, 0.8]], np.float32))


# ---------------------------------------------------------------------------------------- shape

def test_diag_diagonal():
    v = RNG.integers(-9, 9, 4).astype(np.int32)
    check(Tensor(v).diag(), np.diag(v))
    with pytest.raises(ValueError, match="1-d"):
        Tensor(np.zeros((2, 2))).diag()
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    for off, d1, d2 in [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (0, 2, 0), (-2, -1, 1), (7, 0, 1)]:
        check(Tensor(a).diagonal(off, d1, d2), np.diagonal(a, off, d1, d2))
    with pytest.raises(ValueError, match="must differ"):
        Tensor(a).diagonal(0, 1, 1)


def test_roll_unflatten_unfold_view():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for shifts, dims in [(1, None), (-5, None), (1, 0), ((1, -6), (1, 2)), (4, 2), (0, 1)]:
        check(Tensor(a).roll(shifts, dims), np.roll(a, shifts, dims))
    check(Tensor(a).unflatten(2, (2, -1)), a.reshape(2, 3, 2, 2))
    check(Tensor(a).unflatten(-3, (1, 2)), a.reshape(1, 2, 3, 4))
    check(Tensor(a).view(6, 4), a.reshape(6, 4))
    check(Tensor(a).view((4, -1)), a.reshape(4, 6))
    x = np.arange(10, dtype=np.float32)
    for size, step in [(3, 2), (1, 1), (10, 1), (4, 3)]:
        check(Tensor(x).unfold(0, size, step), np.lib.stride_tricks.sliding_window_view(x, size)[::step])
    win = np.lib.stride_tricks.sliding_window_view(a, 2, axis=1)[:, ::1]
    check(Tensor(a).unfold(1, 2, 1), win)
    with pytest.raises(ValueError, match="unfold size"):
        Tensor(x).unfold(0, 11, 1)


def test_meshgrid():
    a, b, c = np.arange(3), np.arange(4) * 10, np.arange(2) * 100
    for indexing in ("ij", "xy"):
        got = Tensor(a).meshgrid(Tensor(b), Tensor(c), indexing=indexing)
        for g, r in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
            check(g, r.astype(np.int32))
    with pytest.raises(ValueError, match="indexing"):
        Tensor(a).meshgrid(Tensor(b), indexing="yx")


@pytest.mark.parametrize("formula,sizes,ref", [
    ("b c h -> b (c h)", {}, lambda a: a.reshape(2, 12)),
    ("b c (h w) -> b h w c", {"h": 2}, lambda a: a.reshape(2, 3, 2, 2).transpose(0, 2, 3, 1)),
    ("b ... -> ... b", {}, lambda a: a.transpose(1, 2, 0)),
    ("b c h -> b 1 c h", {}, lambda a: a.reshape(2, 1, 3, 4)),
    ("b c h -> h (b c)", {}, lambda a: a.transpose(2, 0, 1).reshape(4, 6)),
    ("b c (h2 w2) -> (b h2) c w2", {"w2": 2}, lambda a: a.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(4, 3, 2)),
])
def test_rearrange(formula, sizes, ref):
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(Tensor(a).rearrange(formula, **sizes), ref(a))


def test_rearrange_errors():
    t = Tensor(np.zeros((2, 3, 4), np.float32))
    for bad in ["b c h", "b c -> b c", "b c h -> b c", "b (c h) w -> b c h w", "b c h -> b c h x", "b b h -> b h"]:
        with pytest.raises(ValueError, match="rearrange"):
            t.rearrange(bad)


# ---------------------------------------------------------------------------------------- creation and facts

def test_like_creation_and_facts():
    x = Tensor(np.zeros((2, 3), np.float32))
    assert x.empty_like().shape == (2, 3) and x.empty_like(dtype="int32").dtype == dtypes.int32
    check(x.const_like(3.5), np.full((2, 3), 3.5, np.float32))
    check(Tensor([1, 2]).const_like(3.7), np.array([3, 3], np.int32))
    r = x.rand_like().numpy()
    assert r.shape == (2, 3) and r.dtype == np.float32 and (r >= 0).all() and (r < 1).all()
    assert Tensor([1, 2]).rand_like(dtype="float16").dtype == dtypes.float16
    with pytest.raises(ValueError, match="float dtype"):
        Tensor([1, 2]).rand_like()
    assert x.randn_like().dtype == dtypes.float32 and Tensor([1, 2]).randn_like().dtype == dtypes.int32
    assert x.size() == (2, 3) and x.size(-1) == 3 and x.nbytes() == 24 and x.element_size() == 4
    assert x.is_floating_point() and not Tensor([1]).is_floating_point()
    check(Tensor([1.7, -2.5, 40000.0]).short(), np.array([1, -2, 40000], np.float32).astype(np.int16))
    assert Tensor([1.5]).bfloat16().dtype == dtypes.bfloat16  # the C backend renders no bfloat16: not run


def test_randperm_kaiming_normal():
    p = Tensor.randperm(50, seed=3)
    assert p.dtype == dtypes.int32
    assert sorted(p.numpy().tolist()) == list(range(50))
    assert Tensor.randperm(5, dtype="int64").dtype == dtypes.int64
    w = Tensor.kaiming_normal(200, 100, a=0.0, seed=1).numpy()
    assert w.shape == (200, 100)
    assert abs(w.std() - math.sqrt(2.0 / 100)) < 0.01 and abs(w.mean()) < 0.01


def test_multinomial():
    Tensor.manual_seed(5)
    probs = np.array([0.1, 0.0, 0.6, 0.3], np.float32)
    draws = Tensor(probs).multinomial(4000, replacement=True).numpy()
    assert draws.dtype == np.int32 and draws.shape == (4000,)
    freq = np.bincount(draws, minlength=4) / 4000
    np.testing.assert_allclose(freq, probs, atol=0.03)
    two = Tensor(np.stack([probs, probs[::-1]])).multinomial(3).numpy()  # without replacement: distinct
    assert two.shape == (2, 3) and all(len(set(r)) == 3 for r in two)
    assert 1 not in two[0] and 2 not in two[1]  # a zero weight is drawn only last
    with pytest.raises(ValueError, match="cannot draw 5"):
        Tensor(probs).multinomial(5)


# ---------------------------------------------------------------------------------------- scatter_reduce, unpool, conv

def _scatter_reduce_ref(x, dim, idx, src, reduce, include_self):
    out = x.astype(np.float64).copy()
    groups: dict = {}
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        groups.setdefault(tuple(tgt), []).append(src[pos])
    for tgt, vals in groups.items():
        vals = ([x[tgt]] if include_self else []) + vals
        out[tgt] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vals)
    return out.astype(x.dtype)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x, src = data(4, 5), data(3, 5)
    idx = RNG.integers(0, 4, size=(3, 4)).astype(np.int32)
    check(Tensor(x).scatter_reduce(0, Tensor(idx), Tensor(src), reduce, include_self),
          _scatter_reduce_ref(x, 0, idx, src, reduce, include_self), rtol=1e-5)
    idx1 = RNG.integers(0, 5, size=(4, 3)).astype(np.int32)
    check(Tensor(x).scatter_reduce(1, Tensor(idx1), Tensor(src.T.copy()), reduce, include_self),
          _scatter_reduce_ref(x, 1, idx1, src.T, reduce, include_self), rtol=1e-5)


def test_scatter_reduce_int_mean_and_errors():
    x = np.array([10, 20, 30], np.int32)
    got = Tensor(x).scatter_reduce(0, Tensor([0, 0, 2]), Tensor(np.array([1, 2, -7], np.int32)), "mean")
    check(got, np.array([(10 + 1 + 2) // 3, 20, (30 - 7) // 2], np.int32))
    with pytest.raises(ValueError, match="reduce must be"):
        Tensor(x).scatter_reduce(0, Tensor([0]), Tensor([1]), "max")


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), ((2, 3), (2, 1), 0)])
def test_max_unpool2d_inverts_max_pool(k, s, p):
    x = data(2, 3, 7, 7)
    out, idx = Tensor(x).max_pool2d(k, s, padding=p, return_indices=True)
    up = out.max_unpool2d(idx, k, s, padding=p, output_size=(7, 7))
    flat = np.zeros((2, 3, 49), np.float32)
    o, i = out.numpy().reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1)
    for a in range(2):
        for c in range(3):
            flat[a, c, i[a, c]] = o[a, c]
    check(up, flat.reshape(2, 3, 7, 7))
    assert Tensor(x[:, :, :6, :6]).max_pool2d(2).max_unpool2d(Tensor(x[:, :, :6, :6]).max_pool2d(
        2, return_indices=True)[1]).shape == (2, 3, 6, 6)


def test_conv_transpose2d_method():
    from rulec.runtime.nn import conv_transpose2d

    x, w, b = data(1, 4, 5, 5), data(4, 3, 3, 3), data(3)
    got = Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), stride=2, padding=1, output_padding=1)
    # the adjoint of conv2d, numerically: scatter each input element's kernel
    ref = np.zeros((1, 3, 12, 12), np.float64)
    for ci in range(4):
        for i in range(5):
            for j in range(5):
                ref[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += x[0, ci, i, j] * w[ci]
    ref = ref[:, :, 1:11, 1:11] + b.reshape(1, 3, 1, 1)
    check(got, ref.astype(np.float32), rtol=1e-4, atol=1e-4)
    check(got, conv_transpose2d(Tensor(x), Tensor(w), Tensor(b), 1, 2, 1, 1, 1).numpy(), lazy=False)


# ---------------------------------------------------------------------------------------- clip's gradient

def test_clip_gradient_at_bounds_is_one():
    x = Tensor(np.array([-2.0, -1.0, 0.0, 1.0, 2.0], np.float32), requires_grad=True)
    x.clip(-1.0, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([0, 1, 1, 1, 0], np.float32))  # tinygrad 0.14's
    y = Tensor(np.array([-1.0, 0.5, 3.0], np.float32), requires_grad=True)
    y.clamp(min_=0.5).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.array([0, 1, 1], np.float32))
    check(Tensor(np.array([np.nan, -3, 3], np.float32)).clip(-1, 1), np.clip(np.array([np.nan, -3, 3], np.float32), -1, 1))


# ---------------------------------------------------------------------------------------- kernel counts

def _pooled():
    out, idx = stored(data(1, 2, 8, 8)).max_pool2d(return_indices=True)
    return out.realize(), idx.realize()


# tinygrad 0.14's count of each program (schedule_linear's kernels, SCACHE=0, measured on the same program)
KERNELS = [
    ("cumprod", 1, lambda: [stored(data(8, 8)).cumprod(1)]),
    ("logcumsumexp", 2, lambda: [stored(data(8, 8)).logcumsumexp(1)]),
    ("roll", 0, lambda: [stored(data(8, 8)).roll(3, 1)]),
    ("diagonal", 1, lambda: [stored(data(8, 8)).diagonal().contiguous()]),
    ("masked_select_size", 4, lambda: [(lambda t: t.masked_select(t > 0.5, size=10))(stored(data(8, 8)))]),
    ("scatter_reduce", 1, lambda: [stored(data(8, 8)).scatter_reduce(
        0, stored(RNG.integers(0, 8, (4, 8)).astype(np.int32)), stored(data(4, 8)), "sum")]),
    ("unfold", 1, lambda: [stored(data(8, 8)).unfold(1, 3, 2).contiguous()]),
    ("rearrange", 1, lambda: [stored(data(8, 8)).rearrange("a (b c) -> (c a) b", c=2).contiguous()]),
    ("normalize", 2, lambda: [stored(data(8, 8)).normalize()]),
    ("atan", 1, lambda: [stored(data(8, 8)).atan()]),
    ("allclose", 1, lambda: [(lambda t: t.allclose(t * 1.0))(stored(data(8, 8)))]),
    ("conv_transpose2d", 1, lambda: [stored(data(1, 4, 5, 5)).conv_transpose2d(stored(data(4, 3, 3, 3)), stride=2)]),
    ("max_unpool2d", 1, lambda: [(lambda o: o[0].max_unpool2d(o[1]))(_pooled())]),
]


@pytest.mark.parametrize("name,tinygrad,build", KERNELS, ids=[k[0] for k in KERNELS])
def test_kernel_counts_at_most_tinygrads(name, tinygrad, build):
    outs = build()
    assert len(outs[0].schedule(*outs[1:])) <= tinygrad
