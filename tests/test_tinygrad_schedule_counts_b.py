"""Programs in the spirit of the second half of tinygrad's scheduler tests (pads, assigns, indexing,
gradients) where rulec differed from tinygrad 0.14: kernel counts measured with tinygrad's
schedule_linear on the same programs, results checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, dtypes

A = np.array([[1.5, -2.0, 0.0, 4.0], [-0.0, 3.0, -1.0, 2.5], [7.0, -6.0, 0.5, 1.0]], dtype=np.float32)


def realized(a: np.ndarray) -> Tensor:
    return Tensor(a.copy()).realize()


@pytest.mark.parametrize("same_value", [lambda w: w * 1, lambda w: 1 * w, lambda w: w / 1, lambda w: -(-w),
                                        lambda w: w.maximum(w), lambda w: (w > 0).where(w, w)],
                         ids=["mul-one", "one-mul", "div-one", "neg-neg", "max-self", "where-same"])
def test_assigning_a_buffer_an_exact_identity_of_itself_is_free(same_value):
    w = realized(A)
    out = w.assign(same_value(w))
    assert Tensor.schedule(out) == []  # tinygrad 0.14: 0 kernels
    np.testing.assert_array_equal(out.numpy(), A)
    assert np.signbit(out.numpy()[1, 0])  # -0.0 stays -0.0: the identity is exact


def test_adding_zero_to_an_integer_buffer_it_is_assigned_to_is_free():
    i = realized(np.arange(6, dtype=np.int32))
    assert Tensor.schedule(i.assign(i + 0)) == []  # tinygrad 0.14: 0 kernels
    np.testing.assert_array_equal(i.numpy(), np.arange(6))
    f = realized(A)
    assert len(Tensor.schedule(f.assign(f + 0))) == 1  # float: -0.0 + 0 is 0.0, not an identity; tinygrad: 0


@pytest.mark.parametrize("make, want", [
    (lambda: Tensor.zeros(4) - 0.0, [0, 0, 0, 0]), (lambda: Tensor.ones(4) * 1, [1, 1, 1, 1]),
    (lambda: Tensor.full((4,), 2.0) / 1, [2, 2, 2, 2]), (lambda: -(-Tensor.ones(4)), [1, 1, 1, 1]),
    (lambda: Tensor.ones(2).pad(((1, 1),)) * 1, [0, 1, 1, 0])],
    ids=["zeros-minus-zero", "ones-times-one", "full-div-one", "neg-neg-ones", "padded-ones-times-one"])
def test_an_identity_of_a_constant_is_that_constant(make, want):
    # the tensor becomes a view of the constant: no kernel, and it reads back (rulec raised here before)
    assert Tensor.schedule(make()) == []
    np.testing.assert_array_equal(make().numpy(), want)
    t = make().realize()
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal((t + 1).numpy(), np.add(want, 1))


def test_an_identity_with_a_constant_on_a_device_keeps_the_device():
    # the arange has no device; the constant has one, so the result must still be computed on it
    for make in (lambda: Tensor.arange(4).float() - Tensor.zeros(4), lambda: Tensor.arange(4).float() * Tensor.ones(4)):
        t = make()
        assert len(Tensor.schedule(t)) == 1  # tinygrad 0.14: 1 (the result has the constant's device)
        np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])


def _np_pad_then_crop(x: np.ndarray, pads: list[tuple[int, int]], np_mode: str) -> np.ndarray:
    grown = np.pad(x, [(max(b, 0), max(a, 0)) for b, a in pads], mode=np_mode)
    return grown[tuple(slice(-min(b, 0), n + min(a, 0)) for n, (b, a) in zip(grown.shape, pads))]


@pytest.mark.parametrize("mode, np_mode", [("replicate", "edge"), ("reflect", "reflect")])
def test_replicate_and_reflect_pads_crop_negative_amounts_after_padding(mode, np_mode):
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    for pads in ([(0, 0), (2, -1), (-1, 2)], [(0, 0), (-3, 1), (1, -4)], [(-1, -1), (0, 0), (-2, 3)]):
        got = Tensor(x).pad(pads, mode=mode)
        np.testing.assert_array_equal(got.numpy(), _np_pad_then_crop(x, pads, np_mode))
    with pytest.raises(ValueError, match=mode):
        Tensor(x).pad(((0, 0), (-3, -2), (0, 0)), mode=mode)  # crops more than the axis holds


def test_circular_pad_crops_before_wrapping():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = Tensor(x).pad(((0, 0), (-1, 3)), mode="circular")
    np.testing.assert_array_equal(got.numpy(), np.pad(x[:, 1:], ((0, 0), (0, 3)), mode="wrap"))
    with pytest.raises(ValueError, match="circular"):
        Tensor(x).pad(((0, 0), (-2, 3)), mode="circular")  # wraps the 2 columns left more than once


def test_the_gradient_of_a_replicate_pad_sum_is_a_function_of_constants():
    x = realized(np.random.default_rng(0).standard_normal((2, 3, 3, 3)).astype(np.float32))
    dx = x.pad((-1, 2, 2, -1), mode="replicate").sum().gradient(x)[0]
    assert dx.device is None  # as tinygrad 0.14: made only of constants, it has no device
    assert Tensor.schedule(dx) == []  # tinygrad 0.14: 0 kernels
    np.testing.assert_array_equal(dx.numpy(), np.broadcast_to([[0, 3, 9], [0, 1, 3], [0, 0, 0]], (2, 3, 3, 3)))
    assert x.pad(((0, 0), (0, 0), (1, 1), (0, 0))).sum().gradient(x)[0].device is None
    x.requires_grad = True
    x.mean().backward()
    assert x.grad.device == x.device  # backward() keeps each .grad on its tensor's device
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 1 / 54, np.float32))


def test_a_gradient_that_reads_the_input_stays_on_its_device():
    x = realized(A)
    g = (x * x).sum().gradient(x)[0]
    assert g.device == x.device
    assert len(Tensor.schedule(g)) == 1  # tinygrad 0.14: 1
    np.testing.assert_allclose(g.numpy(), 2 * A)


def test_a_list_holding_index_tensors_or_slices_is_a_tuple_of_indices():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = Tensor(x)
    picked = t[[Tensor([2]), Tensor([1])]]
    assert len(Tensor.schedule(picked)) == 1  # tinygrad 0.14: 1
    np.testing.assert_array_equal(picked.numpy(), x[np.array([2]), np.array([1])])
    np.testing.assert_array_equal(t[[Tensor([2, 0]), 1]].numpy(), x[[2, 0], 1])
    np.testing.assert_array_equal(t[[slice(0, 2), 1]].numpy(), x[0:2, 1])
    np.testing.assert_array_equal(t[[None, 1]].numpy(), x[None, 1])
    np.testing.assert_array_equal(t[[Ellipsis, 1]].numpy(), x[..., 1])
    np.testing.assert_array_equal(t[[2, 0]].numpy(), x[[2, 0]])  # a list of ints stays one index
    assert t[[Tensor([1])]].dtype == dtypes.int32


def test_a_bound_variable_indexes_like_an_int():
    from rulec.runtime.ir.uop import UOp

    rows = [realized(np.arange(10, dtype=np.float32) * (k + 1)) for k in range(4)]
    i, j = UOp.variable("i", 0, 9).bind(1), UOp.variable("j", 0, 9).bind(7)
    total = rows[0][i] + rows[0][j]
    for r in rows[1:]:
        total = total + r[i] + r[j]
    assert total.shape == ()
    assert len(Tensor.schedule(total)) == 1  # tinygrad 0.14: 2
    assert total.item() == (1 + 7) * (1 + 2 + 3 + 4)
    m = realized(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    col = m[:, UOp.variable("c", 0, 3).bind(2)]
    assert Tensor.schedule(col) == []  # tinygrad 0.14: 0 (a view of m)
    np.testing.assert_array_equal(col.numpy(), np.arange(60).reshape(3, 4, 5)[:, 2])
    w = UOp.variable("w", 0, 3).bind(3)
    np.testing.assert_array_equal((m[0, :, w:w + 2] + 1).numpy(), np.arange(60).reshape(3, 4, 5)[0, :, 3:5] + 1)
    with pytest.raises(IndexError, match="not in range"):
        m[UOp.variable("k", 1, 3).bind(1)]  # k = 3 would read past the axis of 3


def test_setitem_at_a_variable_index_writes_as_assign_through_the_view_does():
    from rulec.runtime.ir.uop import UOp

    x = realized(np.arange(10, dtype=np.float32))
    x[UOp.variable("v", 0, 9).bind(4)] = 100.0  # a pad by the symbolic amounts (v, 9 - v)
    x[UOp.variable("v", 0, 9).bind(6)].assign(Tensor(60.0)).realize()
    np.testing.assert_array_equal(x.numpy(), [0, 1, 2, 3, 100, 5, 60, 7, 8, 9])
