"""The scheduler never produces an unsafe or aliased schedule (issue 7, item 8).

* in-place reads: an assign whose value reads its own target at another index is a copy, then the assign;
* the kernel-AST checker (runtime/schedule/kernel_check.py), which create_schedule runs on every kernel;
* two `contiguous()` tensors are two buffers, even of equal values;
* a view of a tensor of no elements needs no buffer;
* stateful rangeify callbacks give one result per node, however often the engine reaches it.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime import buffers
from rulec.runtime.schedule.callbacks.rangeify import RangeifyContext, map_realize, map_reduce
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.schedule.kernel_check import UnsafeKernelError, check_kernel, unsafe_reads
from rulec.runtime.ir.ops import Ops
from rulec.runtime.schedule.scheduler import create_schedule, schedule_pipeline
from rulec.runtime.ir.uop import UOp

A = np.arange(9, dtype=np.float32).reshape(3, 3) - 4


def realized(a: np.ndarray) -> Tensor:
    return Tensor(a.copy()).realize()


def buffer_of(t: Tensor) -> UOp:
    (buf,) = [u for u in t.uop.toposort() if u.op is Ops.BUFFER]
    return buf


# ----------------------------------------------------------------------------- in-place reads

HAZARDS = [
    ("w.T", lambda w: w.T, lambda a: a.T),
    ("w.flip(0)", lambda w: w.flip(0), lambda a: a[::-1]),
    ("w + w.T", lambda w: w + w.T, lambda a: a + a.T),
    ("(w + 1).T", lambda w: (w + 1).T, lambda a: (a + 1).T),
    ("w[0:1] broadcast", lambda w: w[0:1].expand(3, 3) * w, lambda a: a[0:1] * a),
    ("w shifted by a pad", lambda w: w[1:].pad(((0, 1), (0, 0))), lambda a: np.pad(a[1:], ((0, 1), (0, 0)))),
    ("w * w.sum()", lambda w: w * w.sum(), lambda a: a * a.sum()),
    ("w - w.mean(1)", lambda w: w - w.mean(axis=1, keepdim=True), lambda a: a - a.mean(1, keepdims=True)),
]


@pytest.mark.parametrize("name,value,want", HAZARDS, ids=[h[0] for h in HAZARDS])
def test_assign_reading_its_target_elsewhere_copies_first(name, value, want):
    w = realized(A)
    buf = buffer_of(w)
    w.assign(value(w))
    items = w.schedule()
    assert len(items) == 2, f"{name}: {len(items)} kernels; a copy then the assign is 2 (tinygrad: 2)"
    first, last = items
    assert buf not in [first.buffers[o] for o in first.outputs], "the copy must not write the target"
    assert [last.buffers[o] for o in last.outputs] == [buf]
    assert unsafe_reads(last.ast) == []
    w.realize()
    np.testing.assert_allclose(w.numpy(), want(A), rtol=1e-6)


@pytest.mark.parametrize("value", [lambda w: w + 1, lambda w: w * w, lambda w: (w > 0).where(w, 0.5 * w)])
def test_assign_reading_its_target_at_the_store_index_is_one_kernel(value):
    w = realized(A)
    want = value(Tensor(A)).numpy()
    w.assign(value(w))
    assert len(w.schedule()) == 1
    np.testing.assert_allclose(w.realize().numpy(), want)


def test_views_of_the_assigned_tensor_see_the_new_value():
    w = realized(A)
    v = w.reshape(9)
    w.assign(w.T).realize()
    np.testing.assert_array_equal(v.numpy(), A.T.reshape(9))


# ----------------------------------------------------------------------------- the checker


def _transpose_kernel(read_same: bool) -> UOp:
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(9), (), 0)
    r0, r1 = UOp.range(3, 0), UOp.range(3, 1)
    store_at = r0 + r1 * 3
    read_at = store_at if read_same else r1 + r0 * 3
    load = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, g.dtype, (g, read_at)),))
    return UOp.sink(UOp(Ops.STORE, dtypes.float32, (UOp(Ops.INDEX, g.dtype, (g, store_at)), load + 1.0, r1, r0)))


def test_checker_rejects_a_load_of_the_stored_buffer_at_another_index():
    with pytest.raises(UnsafeKernelError, match=r"buf0 is read at \[\(r1 \+ \(r0 \* 3\)\)\] and written at"):
        check_kernel(_transpose_kernel(read_same=False))
    check_kernel(_transpose_kernel(read_same=True))


def test_checker_rejects_one_buffer_bound_twice():
    buf = buffers.new_buffer_uop(dtypes.float32, 9)
    with pytest.raises(UnsafeKernelError, match="aliased arguments"):
        check_kernel(_transpose_kernel(read_same=True), (buf, buf))


def test_a_kernel_found_safe_is_analysed_once_but_every_binding_is_checked(monkeypatch):
    # a training loop schedules the same kernels every step: one found safe (by its AST without tags and
    # its buffer sizes) is not analysed again; aliasing depends on the binding, and is checked every time
    from rulec.runtime.schedule import kernel_check

    calls = []
    real = kernel_check.unsafe_reads
    monkeypatch.setattr(kernel_check, "unsafe_reads", lambda ast: calls.append(ast) or real(ast))
    monkeypatch.setattr(kernel_check, "_safe", set())
    ast = _transpose_kernel(read_same=True)
    buf, other = buffers.new_buffer_uop(dtypes.float32, 9), buffers.new_buffer_uop(dtypes.float32, 9)
    check_kernel(ast, (buf,))
    check_kernel(ast.replace(tag=("step", 2)), (other,))   # the next step's copy: tags differ
    assert len(calls) == 1
    with pytest.raises(UnsafeKernelError, match="aliased arguments"):
        check_kernel(ast, (buf, buf))
    small = buffers.new_buffer_uop(dtypes.float32, 4)        # another size: analysed anew, and refused
    with pytest.raises(UnsafeKernelError, match=r"buf0 \(size 4\) is reached at indices 0..8"):
        check_kernel(ast, (small,))
    assert len(calls) == 2


def test_checker_ignores_validity_gates():
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 0)
    r = UOp.range(4, 0)
    gated = (r < 2).where(r, UOp(Ops.INVALID, dtypes.index))
    load = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, g.dtype, (g, gated)),))
    ast = UOp.sink(UOp(Ops.STORE, dtypes.float32, (UOp(Ops.INDEX, g.dtype, (g, r)), load, r)))
    assert unsafe_reads(ast) == []


def test_scheduler_refuses_to_run_an_unsafe_kernel():
    """Without the hazard rule (earliest rewrites reduced to the reshape rule), the checker stops the schedule."""
    pipe = schedule_pipeline()
    stages = [dataclasses.replace(s, rules=["double_reshape"]) if s.name == "earliest rewrites" else s
              for s in pipe.stages]
    w = realized(A)
    w.assign(w.T)
    with pytest.raises(UnsafeKernelError, match="unsafe kernel"):
        create_schedule(UOp.sink(w.uop), dataclasses.replace(pipe, stages=stages))


# ----------------------------------------------------------------------------- aliasing


def test_equal_contiguous_tensors_are_distinct_buffers():
    x = Tensor.ones(4).contiguous()
    y = Tensor.ones(4).contiguous()
    Tensor.realize(x, y)
    assert buffer_of(x) is not buffer_of(y)
    x.assign(x + 1).realize()
    np.testing.assert_array_equal(x.numpy(), [2, 2, 2, 2])
    np.testing.assert_array_equal(y.numpy(), [1, 1, 1, 1])


def test_two_contiguous_of_one_computed_value_are_two_buffers():
    a = realized(A)
    x, y = (a + 1).contiguous(), (a + 1).contiguous()
    Tensor.realize(x, y)
    x.assign(x * 0).realize()
    np.testing.assert_array_equal(y.numpy(), A + 1)


@pytest.mark.parametrize("view", [lambda t: t, lambda t: t.reshape(-1), lambda t: t[1:], lambda t: t[1]])
def test_contiguous_of_a_contiguous_part_of_a_buffer_is_that_storage(view):
    # tinygrad 0.14: no kernel, and the result shares the storage (an assign through it writes the buffer)
    a = realized(A)
    v = view(a).contiguous()
    assert v.schedule() == []
    v.assign(v * 0 - 1).realize()
    want = A.copy()
    view(want)[...] = -1
    np.testing.assert_array_equal(a.numpy(), want)


def test_contiguous_of_a_strided_view_is_a_copy():
    a = realized(A)
    v = a.T.contiguous()
    assert len(v.schedule()) == 1
    v.assign(v * 0).realize()
    np.testing.assert_array_equal(a.numpy(), A)


# ----------------------------------------------------------------------------- zero-size views


def test_view_of_an_empty_tensor_needs_no_buffer():
    t = (Tensor.ones(2).contiguous().realize().shrink(((1, 1),)) * 2).pad(((1, 0),))
    assert t.schedule() == []
    np.testing.assert_array_equal(t.numpy(), [0.0])


def test_empty_parts_inside_a_kernel():
    x = realized(np.array([1.0, 2.0, 3.0], np.float32))
    empty = x[1:1] * 2
    out = empty.pad(((2, 1),)) + x
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(empty.sum().numpy(), 0.0)


# ----------------------------------------------------------------------------- unscheduled ops


@pytest.mark.parametrize("last,want", [(lambda t: t.abs(), 1.25), (lambda t: t * t, 1.5625),
                                       (lambda t: t.maximum(-t) + t, 2.5)])
def test_reduce_where_reduce_read_twice_is_one_kernel(last, want):
    x = realized(np.array([[1, -2], [0.5, 0.25]], np.float32))
    r = x.sum(axis=1)
    out = last((r < 0).where(0.5, r).sum())
    assert len(out.schedule()) == 1  # tinygrad: 1
    assert out.numpy() == pytest.approx(want)


def test_rangeify_callbacks_give_one_result_per_node():
    """The engine may rewrite a node twice (two rewrite chains meet, or one is retried after RewriteNotReady):
    fresh ranges must be the same both times, or consumers of one reduce disagree about its ranges."""
    src = Tensor(A).uop
    red = UOp(Ops.REDUCE_AXIS, src.dtype, (src,), (Ops.ADD, (1,)))
    ctx = RangeifyContext()
    r = ctx.new_range(3)
    idx = UOp(Ops.INDEX, red.dtype, (red, r, UOp.const(dtypes.index, 0)))
    assert map_reduce(ctx, idx, red) is map_reduce(ctx, idx, red)
    real = UOp(Ops.REALIZE, src.dtype, (src,))
    assert map_realize(ctx, real) is map_realize(ctx, real)


def test_a_view_of_the_target_stays_a_view_after_assigning_it_to_itself():
    """The value of `w.assign(w)` is stored to a fresh buffer first; `w.reshape(9)`, which reads the same node,
    must not become a view of that copy (it would miss every later assign to w)."""
    w = realized(A)
    flat = w.reshape(9)
    w.assign(w).realize()
    w.assign(w + w).realize()
    np.testing.assert_array_equal(flat.numpy(), 2 * A.reshape(9))


def test_chained_assigns_write_the_tensors_own_buffer():
    """`a.assign(x); a.assign(y)`: the second assign's target is the first assign, which is the buffer too."""
    a = realized(np.arange(4, dtype=np.float32))
    buf, view = buffer_of(a), a.reshape(2, 2)
    a.assign(a + 1)
    a.assign(a * 2)
    assert len(a.schedule()) == 2
    a.realize()
    assert buffer_of(a) is buf
    np.testing.assert_array_equal(view.numpy(), [[2, 4], [6, 8]])
    a.assign(a + 1)
    a.assign(a.flip(0)).realize()  # reads the pending value elsewhere: a fresh buffer first
    np.testing.assert_array_equal(view.numpy().reshape(-1), [9, 7, 5, 3])
