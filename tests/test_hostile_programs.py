"""Hostile tensor programs (issue 7, "Trust"): a correct result or a clear error, never a silent wrong one.

Each test is a program a red-team probe found wrong (or a kernel the static bounds check must judge),
reduced to its core:

* the static bounds check (runtime/schedule/kernel_bounds.py, run by check_kernel on every scheduled kernel):
  every LOAD/STORE index, under its validity gate, lies inside its buffer;
* assign ordering: a kernel that reads a buffer's old contents runs before any assign to that buffer,
  whatever order the graph lists them in; assigns that swap buffers copy their values first; a kernel
  that would need both the old and the new contents of one buffer is a clear "cycle" error (as
  tinygrad), never a read of the new contents;
* buffer sharing between tensors whose graphs are equal (as tinygrad 0.14: hash-consed graphs).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import SEARCH, examples

from rulec import Tensor
from rulec.runtime.schedule import kernel_bounds
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.schedule.kernel_check import UnsafeKernelError, check_kernel
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

# ----------------------------------------------------------------------------- hand-built kernels


def _kernel(size: int, loop: int, index_of) -> UOp:
    """buf0[size] = buf1[index_of(r0)] over r0 < loop (the load is the index under test)."""
    r = UOp.range(loop, 0)
    out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(loop), (), 0)
    src = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(size), (), 1)
    load = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(size), (src, index_of(r))),))
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(loop), (out, r)), load, r))
    return UOp.sink(store)


def _gated(valid: UOp, idx: UOp) -> UOp:
    return UOp(Ops.WHERE, idx.dtype, (valid, idx, UOp(Ops.INVALID, idx.dtype)))


def test_bounds_check_refuses_a_load_past_the_end():
    with pytest.raises(UnsafeKernelError, match=r"buf1 \(size 4\) is reached at indices 1\.\.4"):
        check_kernel(_kernel(4, 4, lambda r: r + 1))


def test_bounds_check_refuses_a_negative_index():
    with pytest.raises(UnsafeKernelError, match=r"indices -1\.\.2"):
        check_kernel(_kernel(4, 4, lambda r: r - 1))


def test_bounds_check_refuses_a_gate_that_lets_an_out_of_bounds_lane_through():
    # r0 - 1 under `0 < r0` is fine; under `r0 < 3` the lane r0 = 0 reads index -1
    check_kernel(_kernel(4, 5, lambda r: _gated(UOp.const(dtypes.index, 0) < r, r - 1)))
    with pytest.raises(UnsafeKernelError, match="buf1"):
        check_kernel(_kernel(4, 5, lambda r: _gated(r < 3, r - 1)))


def test_bounds_check_narrows_a_gated_subexpression():
    # a padded conv reads ((r % 7) - 1) only where 0 < r % 7 < 6: the gate bounds the MOD, not the range
    def idx(r: UOp) -> UOp:
        m = r % 7
        return _gated((UOp.const(dtypes.index, 0) < m) & (m < 6), m - 1)

    check_kernel(_kernel(5, 20, idx))
    assert kernel_bounds.gated_bounds(idx(UOp.range(20, 0))) == (0, 4)


def test_bounds_check_solves_a_gate_on_an_affine_expression_for_its_range():
    # a flipped pad gates on `4 - r0`; the index uses `r0 - 1`: the gate bounds r0 through the subtraction
    r = UOp.range(5, 0)
    four = UOp.const(dtypes.index, 4)
    idx = _gated((four - r < 4) & (UOp.const(dtypes.index, 1) < (four - r) * 2), r - 1)
    assert kernel_bounds.gated_bounds(idx) == (0, 2)  # 1 <= r0 <= 3


def test_bounds_check_decides_correlated_indices_exactly():
    # intervals lose that both terms are one range: 2*r - r is [-3, 6] to them, [0, 3] in fact
    check_kernel(_kernel(4, 4, lambda r: r * 2 - r))
    with pytest.raises(UnsafeKernelError, match=r"indices 0\.\.3"):
        check_kernel(_kernel(3, 4, lambda r: r * 2 - r))


def test_bounds_check_skips_an_access_whose_gate_is_never_true():
    check_kernel(_kernel(4, 4, lambda r: _gated(r < 0, r + 100)))


def test_bounds_check_uses_the_bound_buffer_size_when_smaller():
    ast = _kernel(8, 4, lambda r: r + 4)
    check_kernel(ast)
    small = UOp(Ops.BUFFER, dtypes.float32, (UOp(Ops.UNIQUE, arg=-1), UOp(Ops.DEVICE, arg="CPU")), 6)
    out = UOp(Ops.BUFFER, dtypes.float32, (UOp(Ops.UNIQUE, arg=-2), UOp(Ops.DEVICE, arg="CPU")), 4)
    with pytest.raises(UnsafeKernelError, match=r"size 6"):
        check_kernel(ast, (out, small))


@pytest.mark.parametrize("program", [
    lambda a: a.pad(((2, 2), (3, 3)), mode="reflect") + 1,
    lambda a: a.pad(((1, 1), (2, 2)), mode="circular").contiguous(),  # a view until stored
    lambda a: a.reshape(1, 1, 4, 6).conv2d(Tensor.ones(2, 1, 3, 3), padding=1),
    lambda a: a.cumsum(1) + a.flip(0).pad(((-1, 1), (2, -2))),
    lambda a: a[1:3, ::1].T.pad(((1, 0), (0, 1)), value=-1.0).max(0),
])
def test_every_scheduled_index_is_proven_in_bounds(program):
    a = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).realize()
    items = program(a).schedule()
    assert items
    for item in items:
        sizes = {g: item.buffers[g.arg].arg for g in item.ast.toposort() if g.op is Ops.DEFINE_GLOBAL}
        assert kernel_bounds.out_of_bounds(item.ast, sizes) == []


# ----------------------------------------------------------------------------- assign ordering


def test_a_reader_of_old_contents_runs_before_the_assign_in_either_realize_order():
    for order in (0, 1):
        b0 = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).realize()
        b1 = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6) * 2).realize()
        v0, v1 = b0.flip(0) * 2, b1[2] + b0[2]  # v1 reads b0 as it was (b0's assign is not to a view)
        x, y = b0.assign(v0), b1[2].assign(v1)
        Tensor.realize(*((x, y) if order == 0 else (y, x)))
        np.testing.assert_array_equal(b1.numpy()[2], np.arange(12, 18) * 2 + np.arange(12, 18))
        np.testing.assert_array_equal(b0.numpy(), np.arange(24).reshape(4, 6)[::-1] * 2)


def test_a_chain_of_readers_of_old_contents_runs_in_order_in_every_realize_order():
    # z's new value reads x as it was and w's reads z as it was: x's assign waits for z's, which waits for
    # w's. The order must hold however the graph lists them (it once held only where the later reader
    # came first, and then ran a kernel twice, silently wrong)
    for outs in itertools.permutations(range(3)):
        x = Tensor(np.array([1., 2., 3.], dtype=np.float32)).realize()
        z = Tensor(np.array([10., 20., 30.], dtype=np.float32)).realize()
        w = Tensor(np.zeros(3, dtype=np.float32)).realize()
        w_value, z_value = z * 2, x + 1
        pending = [x.assign(x * 3), z.assign(z_value), w.assign(w_value)]
        Tensor.realize(*(pending[i] for i in outs))
        np.testing.assert_array_equal(x.numpy(), [3, 6, 9], err_msg=str(outs))
        np.testing.assert_array_equal(z.numpy(), [2, 3, 4], err_msg=str(outs))
        np.testing.assert_array_equal(w.numpy(), [20, 40, 60], err_msg=str(outs))


def test_a_reader_of_an_assign_runs_before_the_next_assign_to_its_buffer():
    # r reads b as its first assign wrote it; b's second assign overwrites that, so it waits for r. It
    # once waited only for readers of the contents from before the schedule: r read b * 2 where b's graph
    # came first in the realize
    for first_b in (True, False):
        b = Tensor(np.arange(4, dtype=np.float32)).realize()
        b.assign(b + 1)
        r = b * 10
        b.assign(b * 2)
        Tensor.realize(*((b, r) if first_b else (r, b)))
        np.testing.assert_array_equal(r.numpy(), (np.arange(4) + 1) * 10)
        np.testing.assert_array_equal(b.numpy(), (np.arange(4) + 1) * 2)


def test_one_kernel_reading_two_assigns_to_a_buffer_is_split():
    # both would be one DEFINE_GLOBAL (the kernel once read b * 2 for r's b + 1 too): r, which reads the
    # first version, gets a kernel of its own, run before the second assign (tinygrad 0.14: 11, 22, ..)
    b = Tensor(np.arange(4, dtype=np.float32)).realize()
    b.assign(b + 1)
    r = b * 10
    b.assign(b * 2)
    out = r + b
    assert len(Tensor.schedule(out)) == 4  # tinygrad 0.14: 3
    np.testing.assert_array_equal(out.numpy(), [12, 24, 36, 48])


def test_a_contiguous_copy_of_old_contents_is_taken_before_the_assign():
    a = Tensor.ones(4).contiguous().realize()
    times_a = (a * 3).contiguous()
    a.assign(Tensor.full((4,), 2.0).contiguous())
    np.testing.assert_array_equal((a + times_a).numpy(), [5, 5, 5, 5])


def test_one_kernel_reading_old_and_new_contents_is_split():
    # the same program without contiguous: one kernel would read `a` before and after the assign, so
    # the old read gets a kernel of its own, run before the assign (tinygrad 0.14: a cycle error)
    a = Tensor.ones(4).contiguous().realize()
    times_a = a * 3
    a.assign(Tensor.full((4,), 2.0).contiguous())
    np.testing.assert_array_equal((a + times_a).numpy(), [5, 5, 5, 5])


def test_assigns_that_swap_copy_their_values_first():
    # each value reads, as it was, the buffer the other assign writes: no order of two in-place kernels
    # works, so both values are stored to fresh buffers first (before: a cycle error; tinygrad: too)
    a = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).realize()
    b = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6) * 2).realize()
    old_a, old_b = a * 1, b * 1
    x, y = a.assign(old_b + 1), b.assign(old_a.flip(0))
    assert len(Tensor.schedule(x, y)) == 4
    Tensor.realize(x, y)
    np.testing.assert_array_equal(a.numpy(), np.arange(24).reshape(4, 6) * 2 + 1)
    np.testing.assert_array_equal(b.numpy(), np.arange(24).reshape(4, 6)[::-1])


def test_assigns_that_do_not_swap_keep_one_kernel_each():
    a = Tensor(np.arange(6, dtype=np.float32)).realize()
    b = Tensor(np.arange(6, dtype=np.float32) * 2).realize()
    x, y = a.assign(b + 1), b.assign(b * 3)  # a reads b as it was; b reads only itself: no cycle
    assert len(Tensor.schedule(x, y)) == 2
    Tensor.realize(x, y)
    np.testing.assert_array_equal(a.numpy(), np.arange(6) * 2 + 1)
    np.testing.assert_array_equal(b.numpy(), np.arange(6) * 6)


def test_crossing_assigns_that_read_each_other_through_the_assign():
    a = Tensor.full((4,), 2).contiguous().realize()
    b = Tensor.full((4,), 3).contiguous().realize()
    c = a + 9
    a += b
    b += c
    Tensor.realize(a, b)
    np.testing.assert_array_equal(a.numpy(), [5] * 4)
    np.testing.assert_array_equal(b.numpy(), [14] * 4)


# ----------------------------------------------------------------------------- aliasing


def test_equal_graphs_share_their_buffer_as_in_tinygrad():
    # graphs are hash-consed: x and y are one node, realized into one buffer, and an assign to x
    # writes it (tinygrad 0.14's _apply_map_to_tensors does the same); .contiguous() gives a copy
    a = Tensor(np.arange(4, dtype=np.float32)).realize()
    x, y, z = a + 1, a + 1, (a + 1).contiguous()
    Tensor.realize(x, y, z)
    x.assign(x + 1).realize()
    np.testing.assert_array_equal(y.numpy(), np.arange(4) + 2)
    np.testing.assert_array_equal(z.numpy(), np.arange(4) + 1)


# ----------------------------------------------------------------------------- random assign programs

# views of a (4, 6) buffer, as Tensor code and as numpy indexing (a numpy view writes through, as an assign)
VIEWS = {
    "full": (lambda t: t, lambda a: a),
    "T": (lambda t: t.T, lambda a: a.T),
    "rows1:": (lambda t: t[1:], lambda a: a[1:]),
    "rows:-1": (lambda t: t[:-1], lambda a: a[:-1]),
    "cols2:5": (lambda t: t[:, 2:5], lambda a: a[:, 2:5]),
    "flip0": (lambda t: t.flip(0), lambda a: a[::-1]),
    "flip1": (lambda t: t.flip(1), lambda a: a[:, ::-1]),
    "reshape": (lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
    "row2": (lambda t: t[2], lambda a: a[2]),
    "corner": (lambda t: t[1:3, 1:4], lambda a: a[1:3, 1:4]),
    "half": (lambda t: t.reshape(2, 2, 6)[1], lambda a: a.reshape(2, 2, 6)[1]),
}


def _fit(t, a, shape):
    """(t, a) made to `shape` by a transpose or a reshape, or None."""
    if a.shape == shape:
        return t, a
    if a.ndim == 2 and a.T.shape == shape:
        return t.T, a.T
    if a.size == int(np.prod(shape)):
        return t.reshape(shape), a.reshape(shape)
    return None


@settings(max_examples=examples(80), deadline=None, derandomize=not SEARCH, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_random_assign_programs_equal_numpy(data):
    """Phases of assigns to views of 1-3 buffers, realized together in any order, whose values read views
    of any buffer (the targets too, as they were or as assigned), with reductions; every buffer must equal
    numpy running the assigns in order.

    One case is left out, where tinygrad's rule and numpy's differ: an assign to a view makes every
    pending reader of that storage read it after the assign (tinygrad 0.14), so a view assign after an
    earlier value of the phase read its buffer would change that value, while numpy's is computed."""
    nb = data.draw(st.integers(1, 3), "buffers")
    nps = [np.arange(24, dtype=np.float32).reshape(4, 6) * (k + 1) - 7 * k for k in range(nb)]
    bases = [Tensor(x.copy()).realize() for x in nps]
    names = sorted(VIEWS)
    for _phase in range(data.draw(st.integers(1, 3), "phases")):
        targets = data.draw(st.lists(st.integers(0, nb - 1), min_size=1, max_size=nb, unique=True), "targets")
        group, read = [], set()
        for i in targets:
            view = data.draw(st.sampled_from(names), "target view")
            if view != "full" and i in read:
                continue
            tf, nf = VIEWS[view]
            shape = nf(nps[i]).shape
            tv, nv = None, None
            for _ in range(data.draw(st.integers(1, 2), "terms")):
                j = data.draw(st.integers(0, nb - 1), "read buffer")
                vf, vn = VIEWS[data.draw(st.sampled_from(names), "read view")]
                fit = _fit(vf(bases[j]), vn(nps[j]), shape)
                if fit is None:
                    continue
                read.add(j)
                tv, nv = (fit[0], fit[1].copy()) if tv is None else (tv + fit[0], nv + fit[1])
            if tv is None:
                continue
            if data.draw(st.booleans(), "add a reduction"):
                tv, nv = tv - tv.max(), nv - nv.max()
            group.append(tf(bases[i]).assign(tv))
            nf(nps[i])[...] = nv
        if not group:
            continue
        Tensor.realize(*data.draw(st.permutations(group), "realize order"))  # the order must not matter
        for j in range(nb):
            np.testing.assert_array_equal(bases[j].numpy(), nps[j])


@settings(max_examples=examples(60), deadline=None, derandomize=not SEARCH, database=None)
@given(st.data())
def test_assigns_reading_each_others_old_contents_in_any_realize_order(data):
    """Whole-buffer assigns realized together, each value a view of any buffer as it was: chains of
    readers of old contents (x reads y, y reads z, ...) in any order of the realize; numpy runs them in
    the order they were made, each reading the contents from before the group."""
    nb = data.draw(st.integers(2, 4), "buffers")
    nps = [np.arange(16, dtype=np.float32).reshape(4, 4) * (k + 1) - 7 * k for k in range(nb)]
    bases = [Tensor(x.copy()).realize() for x in nps]
    views = {"full": (lambda t: t, lambda a: a), "T": (lambda t: t.T, lambda a: a.T),
             "flip0": (lambda t: t.flip(0), lambda a: a[::-1])}
    group = []
    for i in data.draw(st.lists(st.integers(0, nb - 1), min_size=2, max_size=nb, unique=True), "targets"):
        j = data.draw(st.integers(0, nb - 1), "read buffer")
        tf, nf = views[data.draw(st.sampled_from(sorted(views)), "read view")]
        # a buffer assigned earlier in the group is read as assigned (tinygrad's lazy semantics), a later
        # one as it was: numpy's arrays hold exactly that at this point
        group.append(bases[i].assign(tf(bases[j]) + 1))
        nps[i] = nf(nps[j]) + 1
    Tensor.realize(*data.draw(st.permutations(group), "realize order"))
    for j in range(nb):
        np.testing.assert_array_equal(bases[j].numpy(), nps[j])


# ----------------------------------------------------------------------------- assigns to views


def test_pending_assigns_to_views_are_seen_by_the_base():
    # `a[i].assign(...)` without realizing it, then reading `a`: the writes happen (tinygrad 0.14 and
    # numpy), where before `a` was read as if they had never been made
    a = Tensor(np.zeros((3, 4), np.float32)).realize()
    for i in range(3):
        a[i].assign(Tensor.full((4,), float(i + 1)))
    np.testing.assert_array_equal(a.numpy(), np.repeat(np.arange(1, 4, dtype=np.float32)[:, None], 4, 1))


def test_a_view_assign_is_seen_by_readers_of_the_storage():
    a = Tensor(np.zeros((3, 4), np.float32)).realize()
    total = a.sum()  # a pending reader: reads the storage after the assign, as in tinygrad
    a.T[1].assign(Tensor([1.0, 2.0, 3.0]))
    a.reshape(12)[-2:].assign(Tensor([5.0, 6.0]))
    want = np.zeros((3, 4), np.float32)
    want.T[1] = [1, 2, 3]
    want.reshape(12)[-2:] = [5, 6]
    np.testing.assert_array_equal(a.numpy(), want)
    assert total.item() == want.sum()


def test_a_pending_assign_to_a_strided_view_is_seen_by_the_base():
    # a step that does not divide the axis pads it up to a multiple first: the PAD had no inverse, so the
    # base (and every reader of it) silently kept the old values until the view itself was realized
    for key, value in (((slice(None, None, -2), slice(1, None, 2)), [[7, 8], [9, 10]]),
                       ((slice(None), slice(None, None, 3)), [[7, 8], [9, 10], [11, 12]])):
        want = np.arange(12, dtype=np.float32).reshape(3, 4)
        a = Tensor(want.copy()).realize()
        total = a.sum()
        a[key].assign(Tensor(np.array(value, np.float32)))
        want[key] = value
        np.testing.assert_array_equal(a.numpy(), want)
        assert total.item() == want.sum()


def test_a_pending_assign_to_a_bitcast_view_writes_the_base():
    # BITCAST was not seen as a view: the assign wrote a value no buffer held and `a` kept its old bits
    want = np.array([1.5, -2.0, 3.25, 0.0], np.float32)
    a = Tensor(want.copy()).realize()
    total = a.sum()
    a.bitcast(dtypes.int32)[1:3].assign(Tensor(np.array([0x40490FDB, -0x40800000], np.int32)))
    want.view(np.int32)[1:3] = [0x40490FDB, -0x40800000]
    np.testing.assert_array_equal(a.numpy().view(np.int32), want.view(np.int32))
    assert total.item() == pytest.approx(float(want.sum()))
    a.bitcast(dtypes.uint32)[0] = 0x3F800000
    assert a.numpy()[0] == 1.0


def test_an_assign_to_an_expanded_view_is_an_error():
    # one stored element read at several places: numpy refuses such writes (its base never saw them here)
    a = Tensor(np.arange(4, dtype=np.float32)).realize()
    with pytest.raises(ValueError, match=r"expanded view \(shape \(1, 4\) expanded to \(3, 4\)\)"):
        a.reshape(1, 4).expand(3, 4).assign(Tensor.ones(3, 4))
    with pytest.raises(ValueError, match="expanded view"):
        a.reshape(1, 4).expand(3, 4)[1] = 5.0
    a.reshape(1, 4).expand(1, 4)[0, 1:3].assign(Tensor([8.0, 9.0]))  # an expand to the same shape is none
    np.testing.assert_array_equal(a.numpy(), [0, 8, 9, 3])


def test_lazy_chain_of_view_assigns_reading_earlier_ones():
    c = Tensor.zeros(4, 3).contiguous().realize()
    for i in range(4):
        c[i].assign(c[max(i - 1, 0)] + 1)
    np.testing.assert_array_equal(c.numpy(), np.repeat(np.arange(1, 5, dtype=np.float32)[:, None], 3, 1))


def test_a_realized_view_assign_keeps_one_kernel():
    a = Tensor(np.arange(6, dtype=np.float32)).realize()
    v = a[1:4]
    assert len(v.assign(v * 10).schedule()) == 1
    v.realize()
    np.testing.assert_array_equal(a.numpy(), [0, 10, 20, 30, 4, 5])
    np.testing.assert_array_equal(v.numpy(), [10, 20, 30])


def test_cumsum_of_a_0d_tensor_is_itself():
    # as tinygrad: axis 0 or -1, the dtype of a sum (numpy gives shape (1,))
    assert Tensor(3.0).cumsum().item() == 3.0
    assert Tensor(True).cumsum(-1).dtype == dtypes.int32


def test_unsafe_read_check_compares_addresses_lane_by_lane():
    # a view assign's kernel reads `12 + ((r1 - 2) * 6 + r0) % 6` where it writes `r0 + 6 * r1`: two
    # expressions, one address on every lane the read's gate (r1 == 2) lets through
    r0, r1 = UOp.range(6, 0), UOp.range(4, 1)
    buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(24), (), 0)
    gate = (UOp.const(dtypes.index, 1) < r1) & (r1 < 3)

    def kernel(read_at: UOp) -> UOp:
        load = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, buf.dtype, (buf, _gated(gate, read_at))),))
        store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, r0 + r1 * 6)), load * 2.0, r0, r1))
        return UOp.sink(store)

    check_kernel(kernel(((r1 - 2) * 6 + r0) % 6 + 12))
    with pytest.raises(UnsafeKernelError, match="buf0 is read at"):
        check_kernel(kernel((r0 + 1) % 6 + 12))  # the neighbour's element: a real hazard
