"""Assign and setitem programs in the style of tinygrad's backend tests (assign, setitem, rangeify):
values equal to numpy's, kernel counts equal to tinygrad 0.14's or lower.

Each program is our own; where a count is asserted, tinygrad 0.14's count for the same program is noted.
"""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor


def stored(values, dtype=None) -> Tensor:
    return Tensor(np.asarray(values, dtype=dtype or np.float32)).contiguous().realize()


# ------------------------------------------------------------------ a value reading old and new contents

def test_reader_of_old_contents_joined_with_an_assign_that_read_the_new():
    # `before` reads p as it was; q's assign reads p after p's assign; `total` joins the two. One kernel
    # can't run both before and after p's assign: `before` gets a kernel of its own, run first
    p, q = stored([1.0, 5.0]), stored([2.0, 3.0])
    before = p + 10
    p.assign(p * 2)
    q.assign(q + p)
    total = q + before
    assert len(Tensor.schedule(p, q, total)) == 4  # tinygrad 0.14: 3 (total reads p after the assign)
    Tensor.realize(p, q, total)
    np.testing.assert_array_equal(p.numpy(), [2.0, 10.0])
    np.testing.assert_array_equal(q.numpy(), [4.0, 13.0])
    np.testing.assert_array_equal(total.numpy(), [15.0, 28.0])


def test_view_of_old_contents_joined_with_an_assign_that_read_the_new():
    # the old contents read through a plain view (no arithmetic) are copied before the assign
    p, q = stored([1.0, 2.0, 3.0]), stored([10.0, 20.0])
    head = p[0:2]
    p.assign(p * 3)
    q.assign(q + p[1:3])
    total = q + head
    Tensor.realize(p, q, total)
    np.testing.assert_array_equal(p.numpy(), [3.0, 6.0, 9.0])
    np.testing.assert_array_equal(q.numpy(), [16.0, 29.0])
    np.testing.assert_array_equal(total.numpy(), [17.0, 31.0])


def test_old_and_new_contents_of_one_buffer_in_one_expression():
    # tinygrad 0.14 raises a cycle error here; the old read is realized first instead
    p = stored([1.0, 1.0, 1.0, 1.0])
    tripled = p * 3
    p.assign(Tensor.full((4,), 2.0).contiguous())
    np.testing.assert_array_equal((p + (tripled - 1)).numpy(), [4.0, 4.0, 4.0, 4.0])


def test_reduce_of_old_contents_joined_with_new():
    p, q = stored([1.0, 2.0]), stored([0.0, 0.0])
    s = p.sum().reshape(1).expand(2)
    p.assign(p + 1)
    q.assign(q + p)
    out = q * s
    Tensor.realize(p, q, out)
    np.testing.assert_array_equal(out.numpy(), [6.0, 9.0])


def test_chained_assigns_realized_with_an_early_reader_keep_one_kernel_each():
    # nothing mixes old and new contents here: no extra kernel
    p = Tensor([1.0]).realize()
    early = p + 10
    p.assign(p * 2)
    p.assign(p + 3)
    assert len(Tensor.schedule(p, early)) == 3
    Tensor.realize(early, p)
    assert early.tolist() == [11.0] and p.tolist() == [5.0]


# ------------------------------------------------------------------ clone gives a buffer of its own

def test_clone_of_arange_is_stored_and_slice_assigns_write_it():
    t = Tensor.arange(12).float().clone()
    assert t.device is not None
    assert len(Tensor.schedule(t)) == 1  # tinygrad 0.14: 1
    t.realize()
    t[0:4].assign(t[6:10])
    assert len(Tensor.schedule(t)) <= 2  # tinygrad 0.14: 2
    expect = np.arange(12, dtype=np.float32)
    expect[0:4] = expect[6:10].copy()
    np.testing.assert_array_equal(t.numpy(), expect)


def test_clone_of_arange_overlapping_shift():
    n, shift = 64, 5
    t = Tensor.arange(n).float().clone().realize()
    t[shift:n].assign(t[0:n - shift])
    expect = np.arange(n, dtype=np.float32)
    expect[shift:] = expect[:n - shift].copy()
    np.testing.assert_array_equal(t.numpy(), expect)


def test_assign_through_a_view_of_a_clone_of_a_view():
    base = Tensor(np.array([[1, 2], [3, 4]], dtype=np.int32)).realize()
    c = base.permute(1, 0).clone()
    c[:, 1:2].assign(Tensor(np.ones((2, 1), np.int32)).realize())
    assert c.tolist() == [[1, 1], [2, 1]]
    assert base.tolist() == [[1, 2], [3, 4]]


def test_two_clones_do_not_share_storage():
    base = stored([1.0, 2.0, 3.0])
    a, b = base.clone(), base.clone()
    a[0:1].assign(Tensor([9.0]))
    assert a.tolist() == [9.0, 2.0, 3.0]
    assert b.tolist() == [1.0, 2.0, 3.0] and base.tolist() == [1.0, 2.0, 3.0]


# ------------------------------------------------------------------ writes through other views

def test_slice_assign_into_a_pending_contiguous_is_seen_by_it():
    buf = Tensor.zeros(8).contiguous()
    part = buf[2:5]
    part.assign(Tensor([1.0, 2.0, 3.0]))
    assert buf.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0]
    assert part.tolist() == [1.0, 2.0, 3.0]


def test_assign_into_a_pending_contiguous_that_reads_itself():
    t = Tensor(np.arange(6, dtype=np.float32)).realize().reshape(2, 3).permute(1, 0).contiguous()
    t[1:].assign(t[:-1] * 10)
    expect = np.arange(6, dtype=np.float32).reshape(2, 3).T.copy()
    expect[1:] = expect[:-1] * 10
    np.testing.assert_array_equal(t.numpy(), expect)


def test_setitem_through_detach_writes_the_storage():
    t = stored(np.zeros((3, 3)))
    t.detach()[1, 2] = 5
    assert t[1, 2].item() == 5.0
    d = t.detach()
    d.assign(d + 1).realize()
    np.testing.assert_array_equal(t.numpy(), np.ones((3, 3)) + np.eye(3)[1:2].T @ np.eye(3)[2:3] * 5)
    np.testing.assert_array_equal(d.numpy(), t.numpy())


def test_assign_broadcasts_the_value_to_the_target():
    t = stored(np.zeros((3, 4)))
    t.assign(Tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(t.numpy(), np.tile([1.0, 2.0, 3.0, 4.0], (3, 1)))
    t.assign(Tensor([[1.0], [2.0], [3.0]]))
    np.testing.assert_array_equal(t.numpy(), np.repeat([[1.0], [2.0], [3.0]], 4, axis=1))


def test_repeated_increment_of_one_element():
    # the kernel reads element 0 on every lane but uses it only on lane 0, where it also writes
    x = Tensor(np.array([0, 0, 0], dtype=np.int32)).realize()
    for _ in range(7):
        x[0] += 1
    assert len(Tensor.schedule(x)) == 14  # tinygrad 0.14: 14
    assert x.tolist() == [7, 0, 0]
    m = Tensor(np.zeros((2, 3), np.float32)).realize()
    m[1, 2] += 4
    m[0] -= 1
    np.testing.assert_array_equal(m.numpy(), [[-1, -1, -1], [0, 0, 4]])


def test_slice_assign_into_a_constant_tensor_writes_it_only():
    # tinygrad 0.14 gives Tensor.ones a buffer; here it is a computed value, and the write reaches it
    ones, other = Tensor.ones(6), Tensor.ones(6)
    src = Tensor(np.arange(6, dtype=np.float32)).realize()
    ones[2:4].assign(src[4:6])
    assert ones.tolist() == [1.0, 1.0, 4.0, 5.0, 1.0, 1.0]
    assert other.tolist() == [1.0] * 6  # an equal graph is another tensor


def test_assign_to_a_view_of_a_computed_value():
    p = Tensor(np.array([1, 2, 3, 4], np.int32)).realize()
    total = p + 10
    total[:2].assign(Tensor(np.array([0, 0], np.int32)))
    assert total.tolist() == [0, 0, 13, 14] and p.tolist() == [1, 2, 3, 4]
    rows = Tensor(np.ones((2, 3), np.float32)).realize().sum(axis=1)
    rows[1:].assign(Tensor([7.0]))
    assert rows.tolist() == [3.0, 7.0]


def test_assign_through_a_temporary_view_reaches_the_base():
    t = Tensor.arange(6).float().reshape(2, 3)
    t.T[1].assign(Tensor([8.0, 9.0]))
    np.testing.assert_array_equal(t.numpy(), [[0, 8, 2], [3, 9, 5]])
    s = Tensor(np.arange(5, dtype=np.float32)).realize() * 1
    s[1:].assign(s[:-1])  # the value reads the old contents
    assert s.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]


# ------------------------------------------------------------------ names tinygrad programs use

def test_contiguous_backward_keeps_values_and_gradients():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    y = (x * 2).contiguous_backward()
    (y * y).sum().backward()
    np.testing.assert_array_equal(y.numpy(), np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6).reshape(2, 3) * 8)


def test_comparison_of_a_bound_variable_decided_by_its_bounds_is_a_bool():
    from rulec.runtime.ir.uop import UOp

    pos = UOp.variable("pos", 1, 8).bind(3)
    assert bool(pos > 0) is True and bool(pos < 9) is True  # kv-cache code: `if start_pos > 0:`
    with pytest.raises(TypeError, match="no truth value"):
        bool(pos < 5)  # 1..8: not decided


def test_index_by_a_bound_variable_tensor():
    from rulec.runtime.ir.uop import UOp

    data = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3)).realize()
    row = UOp.variable("row", 0, 3)
    for i in (0, 2):
        picked = data[Tensor(row.bind(i))]
        assert len(Tensor.schedule(picked)) <= 1  # tinygrad 0.14: 1
        np.testing.assert_array_equal(picked.numpy(), np.arange(12).reshape(4, 3)[i])


def test_setitem_through_a_temporary_view_of_a_computed_value():
    t = Tensor.arange(6).reshape(2, 3)
    t.T[1, 0] = 50  # numpy writes t; tinygrad 0.14 drops the write
    assert t.tolist() == [[0, 50, 2], [3, 4, 5]]


def test_value_read_between_two_assigns_joined_with_the_later_one():
    # r reads b as the first assign left it; the sum reads it after the second (tinygrad 0.14: 11, 22, ..)
    b = stored([0.0, 1.0, 2.0])
    b.assign(b + 1)
    r = b * 10
    b.assign(b * 2)
    np.testing.assert_array_equal((r + b).numpy(), [12.0, 24.0, 36.0])
