"""Indexing cases in the style of tinygrad's test_indexing, test_getitem_ops, test_masked_tensor and
test_setitem_schedule: the programs are our own; numpy (with the key spelled as a tuple) gives the values,
tinygrad 0.14 the kernel counts and the errors."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, dtypes

GRID = np.arange(1, 7, dtype=np.int32).reshape(3, 2)


@pytest.mark.parametrize("key,as_tuple", [
    ([[0, 0], [0, 1]], ([0, 0], [0, 1])),
    ([[0, 1, 1, 0, 2], [1]], ([0, 1, 1, 0, 2], [1])),
    ([(0, 0, 1, 1), (0, 1, 0, 0)], ([0, 0, 1, 1], [0, 1, 0, 0])),
    ([[[0], [2]], [1, 0]], ([[0], [2]], [1, 0])),
])
def test_a_list_of_index_lists_is_a_tuple_of_indices(key, as_tuple):
    # tinygrad (and torch) read x[[rows, cols]] as x[rows, cols]; only a flat list of ints is one index
    np.testing.assert_array_equal(Tensor(GRID)[key].numpy(), GRID[as_tuple])


def test_a_flat_list_of_ints_is_still_one_index():
    np.testing.assert_array_equal(Tensor(GRID)[[2, 0, 2]].numpy(), GRID[[2, 0, 2]])


def test_setitem_with_a_list_of_index_lists():
    t = Tensor(GRID.copy()).realize()
    t[[[0, 2], [1, 0]]] = Tensor([-1, -2], dtype=dtypes.int32)
    want = GRID.copy()
    want[[0, 2], [1, 0]] = [-1, -2]
    np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize("key", [0.0, (0.0, slice(None)), (0, 1.5), "a"])
def test_a_float_or_other_index_is_an_index_error(key):
    with pytest.raises(IndexError, match="unsupported index"):
        Tensor(GRID)[key]


def test_del_item_is_a_type_error():
    t = Tensor(GRID)
    with pytest.raises(TypeError, match="item deletion"):
        del t[0]


@pytest.mark.parametrize("dt,n,idx", [(dtypes.int8, 200, [-1, -100, 5, -128]), (dtypes.int16, 40000, [-1, -30000])])
def test_a_negative_narrow_index_counts_from_the_end_without_wrapping(dt, n, idx):
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(Tensor(x)[Tensor(idx, dtype=dt)].numpy(), x[np.array(idx)])


def test_setitem_at_a_negative_narrow_index():
    t = Tensor.zeros(200).contiguous().realize()
    t[Tensor([-1, -2], dtype=dtypes.int8)] = Tensor([5.0, 6.0])
    want = np.zeros(200, np.float32)
    want[[-1, -2]] = [5.0, 6.0]
    np.testing.assert_array_equal(t.numpy(), want)


SRC = np.random.default_rng(1).random((10, 100, 200)).astype(np.float32)
ROWS = np.random.default_rng(2).integers(0, 100, (50, 60)).astype(np.int32)
COLS = np.random.default_rng(3).integers(0, 200, (50, 60)).astype(np.int32)


@pytest.mark.parametrize("key,bound", [(lambda r, c: (0, r, c), 100_000), (lambda r, c: (slice(None), r, c), 1_000_000)])
def test_two_index_tensors_read_their_places_not_every_place(key, bound):
    # one linear index over the two axes (as tinygrad): the one-hot pick folds to a read, where a mask
    # per axis loops over all 100*200 places for each of the 3000 picks (60M operations)
    from rulec.helpers import GlobalCounters
    src, r, c = Tensor(SRC).realize(), Tensor(ROWS).realize(), Tensor(COLS).realize()
    GlobalCounters.reset()
    out = src[key(r, c)].numpy()
    assert GlobalCounters.global_ops < bound
    np.testing.assert_array_equal(out, SRC[key(ROWS, COLS)])


CUBE = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize("key", [
    ([0, 2, -1], [1, -4, 3]), (slice(None), [3, 0], [-5, 4]), ([[0], [2]], slice(None), [1, 4]),
    (1, [0, 3], [2, 2]), ([2, 0], 1, [-1, 0]), (Ellipsis, [[1, 2]], [[0], [4]]), ([0, 1], [1, 2], [3, 4]),
])
def test_several_index_tensors_match_numpy(key):
    # the axes' places and numpy's placement of the index axes (in front when the indices are apart)
    np.testing.assert_array_equal(Tensor(CUBE)[key].numpy(), CUBE[key])


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int64, dtypes.uint32])
def test_several_index_tensors_of_any_int_dtype(dt):
    rows, cols = [2, 0, 1], [4, 0, 3]
    out = Tensor(CUBE)[:, Tensor(rows, dtype=dt), Tensor(cols, dtype=dt)]
    np.testing.assert_array_equal(out.numpy(), CUBE[:, rows, cols])


def test_several_index_tensors_out_of_range_select_zero():
    # as tinygrad: a tuple with any index past its axis picks nothing (0), even where the flat place exists
    out = Tensor(CUBE)[Tensor([0, 3, 1, -3, -4]), Tensor([4, 0, 3, 0, 0])].numpy()
    np.testing.assert_array_equal(out, np.stack([np.zeros(5), np.zeros(5), CUBE[1, 3], CUBE[0, 0], np.zeros(5)]))


def test_gradient_through_several_index_tensors():
    x = Tensor(CUBE, requires_grad=True)
    x[Tensor([0, 0, 2]), :, Tensor([1, 1, 4])].sum().backward()
    want = np.zeros_like(CUBE)
    np.add.at(want, ([0, 0, 2], slice(None), [1, 1, 4]), 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), want)


VALS = np.array([1.0, 4.0, 9.0, 16.0], np.float32)
KEEP = np.array([True, False, True, True])


@pytest.mark.parametrize("build,want", [
    (lambda t: t, VALS), (lambda t: t + 1, VALS + 1), (lambda t: t.sqrt(), np.sqrt(VALS)),
    (lambda t: t.cast(dtypes.int32), VALS.astype(np.int32)), (lambda t: t > 5, VALS > 5),
])
@pytest.mark.parametrize("invalid_first", [False, True])
def test_invalid_leaves_the_other_places_unspecified(build, want, invalid_first):
    # tinygrad's test_invalid_tensor: where the mask holds, the value; elsewhere anything is right
    from rulec.runtime.ir.dtype import Invalid
    mask = Tensor(KEEP)
    picked = (~mask).where(Invalid, Tensor(VALS)) if invalid_first else mask.where(Tensor(VALS), Invalid)
    np.testing.assert_array_equal(build(picked).numpy()[KEEP], want[KEEP])


def test_invalid_is_tinygrads_name_under_the_compat_layer():
    import rulec.compat
    with rulec.compat.tinygrad_layer():
        from tinygrad.dtype import Invalid
        assert (Tensor.arange(3) < 2).where(Tensor([10, 20, 30]), Invalid).tolist()[:2] == [10, 20]


def test_both_sides_invalid_is_a_type_error():
    from rulec.runtime.ir.dtype import Invalid
    with pytest.raises(TypeError, match="both values are Invalid"):
        Tensor([True, False]).where(Invalid, Invalid)


@pytest.mark.parametrize("make", [
    lambda: Tensor.ones(4, dtype=dtypes.int32, buffer=False), lambda: Tensor.full((4,), 1, dtype=dtypes.int32, buffer=True),
    lambda: Tensor.zeros(4, dtype=dtypes.int32, buffer=False) + 1, lambda: Tensor.arange(4).ones_like(buffer=False),
])
def test_setitem_into_a_constant_made_with_tinygrads_buffer_flag(make):
    # tinygrad's test_setitem_schedule: Tensor.ones(..., buffer=False) is a broadcast constant
    t = make()
    t[1] = 5
    assert t.tolist() == [1, 5, 1, 1]


def test_like_constants_take_a_device():
    assert Tensor.arange(3).zeros_like(device="CPU:1").device == "CPU:1"


def test_invalids_is_a_tensor_of_unspecified_values_to_write_into():
    # tinygrad's Tensor.invalids / full(shape, Invalid): bool by default as there; a setitem fills places
    from rulec.runtime.ir.dtype import Invalid
    assert Tensor.invalids(2, 3).shape == (2, 3) and Tensor.invalids(2).dtype == dtypes.bool
    assert Tensor.full((4,), Invalid, dtype=dtypes.int32).dtype == dtypes.int32
    t = Tensor.invalids(4, dtype=dtypes.float32)
    t[:] = Tensor([1.0, 2.0, 3.0, 4.0])
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_many_writes_through_two_index_tensors_pick_the_last_writer_by_a_read():
    # past the unrolled writes: the last writer of each place is a max, and its value a one-hot pick the
    # scheduler folds into a read (with a mask on every lane as well, the pick is a loop over the writes)
    from rulec.helpers import GlobalCounters
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(0, 100, 300).astype(np.int32), rng.integers(0, 200, 300).astype(np.int32)
    x = Tensor.zeros(100, 200).contiguous().realize()
    r, c = Tensor(rows).realize(), Tensor(cols).realize()
    GlobalCounters.reset()
    x[r, c] = Tensor.arange(300).float()
    x.realize()
    assert GlobalCounters.global_ops < 30_000_000
    want = np.zeros((100, 200), np.float32)
    for j in range(300):
        want[rows[j], cols[j]] = j
    np.testing.assert_array_equal(x.numpy(), want)
