"""Symbolic shapes as tinygrad 0.14 programs use them (its test_symbolic_ops / test_tensor_variable /
test_symbolic_jit, and a decoder's kv cache), in our own programs: sizes that are sums of bound
variables, pads and concatenations by symbolic amounts, and writes at a variable place. Every value is
checked against numpy for several bindings."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.ir.uop import UOp

RNG = np.random.default_rng(7)


def var(name: str, lo: int, hi: int, value: int) -> UOp:
    return UOp.variable(name, lo, hi).bind(value)


@pytest.mark.parametrize("pos", [0, 2, 5])
def test_a_size_that_is_a_sum_of_variables(pos):
    # a kv-cache read: the first start_pos + n rows, n the new tokens
    data = RNG.random((12, 3), dtype=np.float32)
    start_pos, n = var("start_pos", 0, 8, pos), var("n", 1, 4, 2)
    rows = Tensor(data).shrink(((0, start_pos + n), None))
    np.testing.assert_allclose(rows.sum(0).numpy(), data[:pos + 2].sum(0), rtol=1e-6)
    np.testing.assert_allclose((rows * 2).realize()[:pos + 2].numpy(), data[:pos + 2] * 2)
    ones = Tensor.ones(2, n + start_pos).contiguous()
    assert ones.sum().item() == 2 * (pos + 2)


@pytest.mark.parametrize("pos", [0, 1, 4])
def test_a_pad_by_a_symbolic_amount_keeps_a_fixed_size(pos):
    # the kv-cache write of a gpt2-style decoder: new rows padded to the cache's length, then added
    x = RNG.random((1, 2, 3), dtype=np.float32)
    start_pos = var("start_pos", 0, 6, pos)
    padded = Tensor(x).pad((None, (start_pos, 8 - start_pos - 2), None))
    assert padded.shape == (1, 8, 3)  # 2 + start_pos + (6 - start_pos) is 8 for every binding
    expected = np.zeros((1, 8, 3), np.float32)
    expected[:, pos:pos + 2] = x
    np.testing.assert_array_equal((padded + Tensor.ones(1, 8, 3)).numpy(), expected + 1)
    filled = Tensor(x).pad((None, (start_pos, 1), None), value=-1.0)
    np.testing.assert_array_equal(filled[:, :pos + 3].numpy(), np.pad(x, ((0, 0), (pos, 1), (0, 0)), constant_values=-1))


@pytest.mark.parametrize("n", [1, 3, 7])
def test_a_symbolic_length_padded_back_to_its_base(n):
    a = RNG.random((3, 10), dtype=np.float32)
    x = Tensor(a)[:, :var("n", 1, 10, n)]
    out = (x + 1).pad((None, (0, 10 - x.shape[1])))
    assert out.shape == (3, 10)
    expected = np.zeros((3, 10), np.float32)
    expected[:, :n] = a[:, :n] + 1
    np.testing.assert_allclose(out.numpy(), expected)


def test_a_symbolic_pad_that_can_be_negative_is_refused():
    v = var("v", 1, 10, 8)
    with pytest.raises(ValueError, match="can be negative"):
        Tensor.ones(4).pad(((0, v - 6),))
    with pytest.raises(ValueError, match="only taken by a constant pad"):
        Tensor.ones(4).pad(((v, 0),), mode="reflect")


@pytest.mark.parametrize("i,j", [(1, 4), (3, 2)])
def test_cat_of_symbolic_lengths(i, j):
    a, b = RNG.random((10, 3), dtype=np.float32), RNG.random((10, 3), dtype=np.float32)
    vi, vj = var("i", 1, 10, i), var("j", 1, 10, j)
    both = Tensor(a)[:vi].cat(Tensor(b)[:vj], dim=0)
    np.testing.assert_array_equal(both.realize()[:i + j].numpy(), np.concatenate([a[:i], b[:j]]))
    tail = Tensor(a)[:vi].cat(Tensor(b[:2]), dim=0)
    np.testing.assert_array_equal(tail.realize()[:i + 2].numpy(), np.concatenate([a[:i], b[:2]]))
    cols = Tensor(a.T)[:, :vi].cat(Tensor(b.T)[:, :vj], dim=1)
    np.testing.assert_array_equal(cols.realize()[:, :i + j].numpy(), np.concatenate([a.T[:, :i], b.T[:, :j]], 1))


@pytest.mark.parametrize("pos", [0, 2, 5])
def test_setitem_at_a_variable_place(pos):
    base = RNG.random((6, 4), dtype=np.float32)
    v = var("v", 0, 5, pos)
    cases = [
        (lambda x: x.__setitem__(v, Tensor(np.full(4, 9.0, np.float32))), lambda r: r.__setitem__(pos, 9.0)),
        (lambda x: x.__setitem__((slice(None), v), -1.0), None),
        (lambda x: x.__setitem__(slice(v, None), 0.5), lambda r: r.__setitem__(slice(pos, None), 0.5)),
        (lambda x: x.__setitem__((v, slice(1, 3)), 2.0), lambda r: r.__setitem__((pos, slice(1, 3)), 2.0)),
    ]
    for write, write_np in cases:
        if write_np is None:  # only v in [0, 3] is a column of 4
            w = var("w", 0, 3, min(pos, 3))
            write = lambda x: x.__setitem__((slice(None), w), -1.0)  # noqa: E731
            write_np = lambda r: r.__setitem__((slice(None), min(pos, 3)), -1.0)  # noqa: E731
        x = Tensor(base.copy()).contiguous().realize()
        write(x)
        ref = base.copy()
        write_np(ref)
        np.testing.assert_array_equal(x.numpy(), ref)


def test_a_window_shrink_and_its_assign():
    cache = Tensor.zeros(8, 3).contiguous().realize()
    expected = np.zeros((8, 3), np.float32)
    for pos in range(4):
        v = var("v", 0, 6, pos)
        rows = RNG.random((2, 3), dtype=np.float32)
        cache.shrink(((v, v + 2), None)).assign(Tensor(rows)).realize()
        expected[pos:pos + 2] = rows
        np.testing.assert_array_equal(cache.numpy(), expected)
        np.testing.assert_array_equal(cache.shrink(((v, v + 1), None)).numpy(), expected[pos:pos + 1])


def _decoder_step(cache: Tensor, q: np.ndarray, k: np.ndarray, pos: int, pad_form: bool) -> Tensor:
    """One token of a single-head attention over a kv cache of 8 rows (the two forms decoders use)."""
    start_pos = var("start_pos", 0, 7, pos)
    if pad_form:
        cache.assign(cache + Tensor(k).pad(((start_pos, 8 - start_pos - 1), None))).realize()
    else:
        cache[start_pos:start_pos + 1].assign(Tensor(k)).realize()
    keys = cache.shrink(((0, start_pos + 1), None))
    return (Tensor(q) @ keys.T).softmax(-1) @ keys


@pytest.mark.parametrize("pad_form", [True, False])
def test_a_decoder_with_a_kv_cache(pad_form):
    cache = Tensor.zeros(8, 4).contiguous().realize()
    ks = RNG.random((5, 4), dtype=np.float32)
    qs = RNG.random((5, 1, 4), dtype=np.float32)
    for pos in range(5):
        out = _decoder_step(cache, qs[pos], ks[pos:pos + 1], pos, pad_form).numpy()
        keys = ks[:pos + 1]
        s = qs[pos] @ keys.T
        p = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ keys, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pos", [0, 3])
def test_arange_between_bound_variables(pos):
    start, stop = var("start", 0, 5, pos), var("stop", 6, 10, 8)
    np.testing.assert_array_equal(Tensor.arange(start, stop)[:8 - pos].numpy(), np.arange(pos, 8))
    np.testing.assert_array_equal(Tensor.arange(start + 2)[:pos + 2].numpy(), np.arange(pos + 2))
    with pytest.raises(TypeError, match="step 1"):
        Tensor.arange(0, 10, var("s", 1, 3, 2))
    with pytest.raises(ValueError, match="can be negative"):
        Tensor.arange(start, 3)


@pytest.mark.parametrize("pos", [0, 1, 3])
def test_a_causal_mask_over_the_cache(pos):
    # a decoder's mask for n new tokens after start_pos cached ones: -inf above the shifted diagonal
    n, start_pos = var("n", 1, 10, 4), var("start_pos", 0, 5, pos)
    mask = Tensor.full((1, n, start_pos + n), float("-inf")).triu(start_pos + 1)
    expected = np.triu(np.full((1, 4, pos + 4), -np.inf, np.float32), k=pos + 1)
    np.testing.assert_array_equal(mask.shrink((None, (0, 4), (0, pos + 4))).numpy(), expected)
    low = Tensor.ones(n, start_pos + n).contiguous().tril(start_pos)
    np.testing.assert_array_equal(low.shrink(((0, 4), (0, pos + 4))).numpy(), np.tril(np.ones((4, pos + 4)), k=pos))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_negative_places_count_from_a_symbolic_end(n):
    # the last token of a variable-length sequence: x[:, :n][:, -1]
    a = RNG.random((3, 10), dtype=np.float32)
    x = Tensor(a)[:, :var("n", 1, 10, n)]
    np.testing.assert_array_equal(x[:, -1].numpy(), a[:, n - 1])
    np.testing.assert_array_equal((x[:, -1:] * 2).numpy(), a[:, n - 1:n] * 2)
    with pytest.raises(IndexError, match="smallest size 1"):
        x[:, -3:-1]  # n = 1 would start before the axis
    with pytest.raises(IndexError, match="smallest size"):
        x[:, -2]


@pytest.mark.parametrize("value", [-3, 2, 7])
def test_a_tensor_of_an_expression_of_variables_is_stored_as_an_int(value):
    w = var("w", -10, 10, value)
    t = Tensor(w * 4)
    assert t.dtype.name == "int32"  # its bounds fit: tinygrad commits its weak int the same way
    assert t.item() == 4 * value
    assert (Tensor(3) * (w * 4)).item() == 12 * value
    assert Tensor(w).clone().item() == value
    assert Tensor(UOp.variable("big", 0, 2**40).bind(2**35 + 3)).item() == 2**35 + 3  # read without a kernel


def test_an_identity_of_a_reduced_view_is_still_computed():
    # var over 2 rows divides by n - 1 = 1: `x / 1` of a reshaped reduce was folded onto that view, whose
    # tag rangeify drops, and the tensor was left unscheduled
    a = RNG.random((10, 3), dtype=np.float32)
    t = Tensor(a)
    np.testing.assert_allclose(t[:2].var(0).numpy(), a[:2].var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(t[:UOp.variable("n", 1, 10).bind(2)].var(0).numpy(), a[:2].var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose((t.sum(0) / 1).numpy(), a.sum(0), rtol=1e-6)
    np.testing.assert_allclose((t.sum(0) * 1).numpy(), a.sum(0), rtol=1e-6)
    np.testing.assert_allclose((-(-t.max(1))).numpy(), a.max(1))
    s = t.sum(1)
    np.testing.assert_allclose((s > 1).where(s, s).numpy(), a.sum(1), rtol=1e-6)


def test_a_window_of_a_variable_length_at_a_variable_place():
    # a prompt of n tokens after start_pos cached ones: cache[start_pos:start_pos + n] = the new rows
    cache = Tensor.zeros(16, 4).contiguous().realize()
    expected = np.zeros((16, 4), np.float32)
    pos = 0
    for n in (3, 1, 2):
        rows = RNG.random((4, 4), dtype=np.float32)
        start_pos, nv = var("start_pos", 0, 12, pos), var("n", 1, 4, n)
        cache[start_pos:start_pos + nv].assign(Tensor(rows)[:nv]).realize()
        expected[pos:pos + n] = rows[:n]
        np.testing.assert_array_equal(cache.numpy(), expected)
        seen = cache.shrink(((0, start_pos + nv), None)).sum(0)
        np.testing.assert_allclose(seen.numpy(), expected[:pos + n].sum(0), rtol=1e-6)
        pos += n


def test_new_tensors_of_a_symbolic_shape():
    n = var("n", 1, 10, 3)
    t = Tensor.empty(2, n)
    assert t.shape == (2, n)
    t.assign(Tensor.ones(2, n)).realize()  # its buffer holds the largest binding: 2 x 10
    assert t.sum().item() == 6
    with pytest.raises(ValueError, match="symbolic size is not taken"):
        Tensor.rand(2, n)
    with pytest.raises(ValueError, match="symbolic size is not taken"):
        Tensor.randn(n)
