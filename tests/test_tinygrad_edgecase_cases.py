"""Programs in the style of tinygrad's test_edgecases and test_attention: dropout that drops everything,
swapping a tensor's data (`replace`), and tensor indexing of an axis too long for int32. The programs are
our own; numpy gives the values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rulec import Tensor


def test_dropout_of_everything_is_zeros_with_no_kernel():
    x = Tensor([1.0, math.inf, math.nan, -2.0]).realize()
    old, Tensor.training = Tensor.training, True
    try:
        out = x.dropout(1.0)
    finally:
        Tensor.training = old
    assert len(Tensor.schedule(out)) == 0  # tinygrad 0.14: a constant, no kernel
    np.testing.assert_array_equal(out.numpy(), np.zeros(4, np.float32))  # zeros even where x is inf or nan


def test_replace_swaps_in_another_tensor_of_the_same_shape():
    w = Tensor.ones(3, 2)
    same = w.replace(Tensor.linspace(-0.05, 0.05, 6).reshape(3, 2))
    assert same is w
    np.testing.assert_allclose(w.numpy(), np.linspace(-0.05, 0.05, 6, dtype=np.float32).reshape(3, 2), rtol=1e-6)
    w.replace(Tensor.arange(6).reshape(3, 2))  # dtype and device come with the new data
    assert w.numpy().dtype == np.int32


def test_replace_needs_the_same_shape_and_a_tensor():
    w = Tensor.ones(3, 2)
    with pytest.raises(ValueError, match=r"\(3, 2\) and \(2, 3\)"):
        w.replace(Tensor.ones(2, 3))
    with pytest.raises(TypeError):
        w.replace(np.ones((3, 2)))


def test_tensor_index_of_an_axis_past_int32_reads_with_no_loop():
    # the positions compared with the indices are int64 past int32, and the pick is a gated read
    big = Tensor([1]).expand(2**31 + 3)
    out = big[Tensor([0, 2**31 + 2])]
    np.testing.assert_array_equal(out.numpy(), [1, 1])


def _has_reduce(t: Tensor) -> bool:
    return any(u.op.name == "REDUCE" for item in Tensor.schedule(t) for u in item.ast.toposort())


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.float16])
def test_indexing_by_a_tensor_is_a_gated_read_not_a_loop(dtype):
    w = (np.arange(40).reshape(10, 4) - 7).astype(dtype)
    idx = np.array([[3, -1], [0, 9]], np.int32)
    t = Tensor(w).realize()
    out = t[Tensor(idx)]
    assert not _has_reduce(out)  # one load per element, as tinygrad 0.14's kernel
    np.testing.assert_array_equal(out.numpy(), w[idx])


def test_an_index_past_the_axis_reads_zero_without_reading_memory():
    t = Tensor(np.arange(1, 6, dtype=np.float32)).realize()
    np.testing.assert_array_equal(t[Tensor([7, -9, 2, 5])].numpy(), [0.0, 0.0, 3.0, 0.0])  # as tinygrad 0.14


def test_a_one_hot_over_an_expression_of_the_position_still_sums():
    # e == f(r) with f not the position itself is no pick of one lane: left as the sum
    pos = Tensor.arange(6)
    hits = (Tensor([[2], [4]]) == pos // 2).where(Tensor(np.arange(6, dtype=np.float32)), 0.0).sum(1)
    np.testing.assert_array_equal(hits.numpy(), [4 + 5, 0])


def test_a_clone_keeps_a_clone_of_the_gradient_computed_so_far():
    # tinygrad's fused cross-entropy test clones its inputs after a backward and reads their .grad
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    c = x.clone()
    assert c.grad is not None and c.grad is not x.grad
    np.testing.assert_array_equal(c.grad.numpy(), [2.0, 4.0])
    x.grad.assign(Tensor([9.0, 9.0])).realize()  # the clone's gradient is a buffer of its own
    np.testing.assert_array_equal(c.grad.numpy(), [2.0, 4.0])
    assert Tensor([1.0]).clone().grad is None
