"""Issue 7, item 9: a bad argument to a Tensor method raises a clear error naming it, never a wrong answer.

The rules (runtime/tensor/tensor_args.py, docs/tensor-ir.md "Frontend arguments") follow numpy: sizes, axes,
pads and shrink bounds are integers (TypeError otherwise), new sizes are >= 0, axes are in range
(AxisError, both a ValueError and an IndexError). The property test at the end draws random valid and
invalid arguments and checks each result against numpy's: equal, or both raise."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.tensor.tensor import Tensor
from rulec.runtime.tensor.tensor_args import AxisError, const_value

M = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3


def lazy(t: Tensor) -> np.ndarray:
    return t.lazy_numpy()


# ============================================================================ the reproductions


def test_negative_size_is_an_error_not_a_size_of_one():
    with pytest.raises(ValueError, match=r"negative dimensions .* shape \(-1, 3\)"):
        Tensor.zeros(-1, 3)
    for make in (Tensor.ones, Tensor.empty, Tensor.rand, Tensor.randn):
        with pytest.raises(ValueError, match=r"negative dimensions .* shape \(2, -2\)"):
            make(2, -2)
    with pytest.raises(ValueError, match=r"negative dimensions .* shape \(-2,\)"):
        Tensor.full((-2,), 1.0)


@pytest.mark.parametrize("make, pattern", [
    (lambda: Tensor.zeros(2.0, 3), r"shape \(2\.0, 3\).*float 2\.0"),
    (lambda: Tensor.zeros((2.5, 3)), r"shape \(2\.5, 3\).*float 2\.5"),
    (lambda: Tensor.rand(2.5), r"shape \(2\.5,\).*float"),
    (lambda: Tensor.full((3, 1.0), 0), r"shape \(3, 1\.0\)"),
    (lambda: Tensor.ones(True, 3), r"shape \(True, 3\).*bool"),
    (lambda: Tensor.zeros(None), r"shape \(None,\)"),
    (lambda: Tensor.zeros("ab"), r"shape \('ab',\).*str"),
    (lambda: Tensor(M).pad(((0.5, 0), (0, 0))), r"padding .*0\.5"),
    (lambda: Tensor(M).pad((1.0, 1)), r"padding .*float"),
    (lambda: Tensor(M).shrink(((0, 1.5), None)), r"shrink .*float 1\.5"),
    (lambda: Tensor(M).shrink(((0.0, 1), None)), r"shrink .*float 0\.0"),
    (lambda: Tensor(M).reshape(2.0, 12), r"shape \(2\.0, 12\)"),
    (lambda: Tensor(M).reshape(4, 1, 6.0), r"shape \(4, 1, 6\.0\)"),
    (lambda: Tensor(M).reshape(4, 1, 6).expand(4, 3.0, 6), r"shape \(4, 3\.0, 6\)"),
    (lambda: Tensor(M).permute(1.0, 0), r"permutation \(1\.0, 0\)"),
    (lambda: Tensor(M).permute(True, 0), r"permutation \(True, 0\)"),
    (lambda: Tensor(M).sum(axis=1.0), r"axis .*float 1\.0"),
    (lambda: Tensor(M).max(axis=(0, 1.0)), r"axis .*float 1\.0"),
    (lambda: Tensor(M).sum(axis=True), r"axis .*bool"),
    (lambda: Tensor(M).mean(axis="0"), r"axis .*str"),
    (lambda: Tensor(M).flip(0.0), r"axis .*float"),
    (lambda: Tensor(M).argmax(axis=(0,)), r"axis .*tuple"),
    (lambda: Tensor(M).transpose(1.0, 0), r"axis .*float"),
    (lambda: Tensor(M).unsqueeze(1.5), r"axis .*float"),
    (lambda: Tensor(M).squeeze(0.0), r"axis .*float"),
    (lambda: Tensor(M).flatten(0.0), r"axis .*float"),
    (lambda: Tensor(M).cumsum(1.0), r"axis .*float"),
    (lambda: Tensor(M).softmax(1.0), r"axis .*float"),
    (lambda: Tensor(M).cat(Tensor(M), dim=1.0), r"axis .*float"),
    (lambda: Tensor(M).stack(Tensor(M), dim=0.0), r"axis .*float"),
    (lambda: Tensor(M).reshape(1, 1, 4, 6).conv2d(Tensor(np.ones((1, 1, 2, 2), np.float32)), stride=1.5),
     r"stride .*float"),
    (lambda: Tensor(M).reshape(1, 1, 4, 6).conv2d(Tensor(np.ones((1, 1, 2, 2), np.float32)), padding=(0.5, 1)),
     r"padding .*float"),
    (lambda: Tensor(M).reshape(1, 1, 4, 6).conv2d(Tensor(np.ones((1, 1, 2, 2), np.float32)), padding=0.5),
     r"padding .*float 0\.5"),
    (lambda: Tensor(M).reshape(1, 1, 4, 6).conv2d(Tensor(np.ones((1, 1, 2, 2), np.float32)), groups=1.0),
     r"groups .*float"),
    (lambda: Tensor.arange(0, 3, "1"), r"arange takes Python numbers; its step is str"),
    (lambda: Tensor.zeros(2, dtype=3), r"dtype"),
    (lambda: Tensor(M).cat(M), r"cat takes Tensors; argument 1 is ndarray"),
    (lambda: Tensor(M).stack(Tensor(M), [1]), r"stack takes Tensors; argument 2 is list"),
    (lambda: Tensor.zeros(np.array(3.0)), r"shape .*ndarray"),
])
def test_fractional_and_non_integer_arguments_are_type_errors(make, pattern):
    with pytest.raises(TypeError, match=pattern):
        make()


def test_sum_axis_float_names_the_axis():
    with pytest.raises(TypeError, match=r"axis must be an integer, not float 1\.0"):
        Tensor(M).sum(axis=1.0)
    # numpy integers are integers
    np.testing.assert_allclose(lazy(Tensor(M).sum(axis=np.int64(1))), M.sum(axis=1))


@pytest.mark.parametrize("shape, axis", [((0,), None), ((0, 3), None), ((0, 3), 0), ((3, 0), 1), ((3, 0), -1)])
def test_argmax_argmin_of_nothing_is_numpys_value_error(shape, axis):
    t = Tensor(np.zeros(shape, np.float32))
    for name in ("argmax", "argmin"):
        with pytest.raises(ValueError, match=f"attempt to get {name} of an empty sequence"):
            getattr(np.zeros(shape), name)(axis=axis)
        with pytest.raises(ValueError, match=f"attempt to get {name} of an empty sequence.*{re.escape(str(shape))}"):
            getattr(t, name)(axis=axis)


def test_argmax_over_a_full_axis_of_an_empty_tensor_is_empty():
    x = np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(lazy(Tensor(x).argmax(axis=1)), np.argmax(x, axis=1))


NAN = np.nan


@pytest.mark.parametrize("x", [
    [1.0, NAN, 3.0, NAN], [NAN, 1.0], [1.0, 2.0, NAN], [NAN, NAN], [-np.inf, NAN, np.inf],
    [[1.0, NAN, 5.0], [NAN, 2.0, 2.0], [0.0, 0.0, NAN]], [[3.0, 1.0, 2.0], [NAN, 2.0, 9.0]],
])
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_with_nan_are_numpys(x, axis, keepdim):
    x = np.array(x, np.float32)
    for name in ("argmax", "argmin"):
        want = getattr(np, name)(x, axis=axis, keepdims=keepdim)
        got = lazy(getattr(Tensor(x), name)(axis=axis, keepdim=keepdim))
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{name} of {x.tolist()} on axis {axis}")


def test_argmax_with_nan_through_the_scheduler():
    x = np.array([[1.0, NAN, 5.0, NAN], [4.0, 2.0, 9.0, 9.0], [NAN, 0.0, 0.0, 1.0]], np.float32)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(Tensor(x).argmax(axis).numpy(), np.argmax(x, axis))
        np.testing.assert_array_equal(Tensor(x).argmin(axis).numpy(), np.argmin(x, axis))
    np.testing.assert_array_equal(Tensor(x.astype(np.float16)).argmax(1).numpy(), np.argmax(x, 1))


# ============================================================================ the audit


def test_axis_error_is_a_value_error_and_an_index_error():
    for call in (lambda: Tensor(M).sum(axis=2), lambda: Tensor(M).flip(-3), lambda: Tensor(M).argmax(5),
                 lambda: Tensor(M).unsqueeze(3), lambda: Tensor(M).stack(Tensor(M), dim=3)):
        with pytest.raises(AxisError, match=r"axis -?\d is out of range for shape \(4, 6\)") as info:
            call()
        assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)


@pytest.mark.parametrize("call, pattern", [
    (lambda t: t.reshape(-2, -12), r"cannot reshape \(4, 6\) to \(-2, -12\)"),
    (lambda t: t.reshape(None, None, None), r"cannot reshape \(4, 6\) to \(None, None, None\)"),
    (lambda t: t.reshape(0, -1), r"cannot reshape \(4, 6\) to \(0, -1\)"),
    (lambda t: t.reshape(4, 1, 6).expand(4, -2, 6), r"cannot expand \(4, 1, 6\) to \(4, -2, 6\)"),
    (lambda t: t.permute(0, 0), r"bad permutation \(0, 0\) for shape \(4, 6\)"),
    (lambda t: t.permute(0, 5), r"bad permutation \(0, 5\)"),
    (lambda t: t.flip((0, 0)), r"repeated axis in axis \(0, 0\) for shape \(4, 6\)"),
    (lambda t: t.sum(axis=(1, -1)), r"repeated axis .* for shape \(4, 6\)"),
    (lambda t: t.shrink(((3, 1), None)), r"bad shrink \(\(3, 1\), None\) for shape \(4, 6\)"),
    (lambda t: t.shrink(((0, 1, 2), None)), r"bad shrink .* each axis takes \(start, end\)"),
    (lambda t: t.shrink(((-1, 2), None)), r"bad shrink"),
    (lambda t: t.pad(((1, 2, 3), (0, 0))), r"padding .* an int or a pair"),
    (lambda t: t.pad(((1, 1), (0, 0), (0, 0))), r"bad padding .* for shape \(4, 6\)"),
    (lambda t: t.pad((1, 1, 1)), r"bad padding \(1, 1, 1\) for shape \(4, 6\)"),
    (lambda t: t.pad(((4, 0), (0, 0)), mode="reflect"), r"reflect padding \(4, 0\) does not fit axis 0"),
    (lambda t: t @ Tensor(np.ones(5, np.float32)), r"cannot matmul \(4, 6\) with \(5,\)"),
    (lambda t: Tensor.arange(0, 5, 0), r"arange step must not be 0"),
    (lambda t: Tensor.arange(float("nan")), r"arange stop must be finite, got nan"),
    (lambda t: Tensor.arange(0, float("inf")), r"arange stop must be finite, got inf"),
    (lambda t: Tensor.arange(float("-inf"), 3), r"arange start must be finite"),
    (lambda t: Tensor.zeros(2, dtype="foo"), r"unknown dtype 'foo'"),
    (lambda t: Tensor(float("nan"), dtype=dtypes.int32), r"cannot convert nan to int32"),
])
def test_bad_arguments_are_value_errors_naming_them(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(Tensor(M))


def test_pad_and_shrink_accept_numpy_integers():
    i = np.int64
    np.testing.assert_array_equal(lazy(Tensor(M).pad(((i(1), i(0)), None))), np.pad(M, ((1, 0), (0, 0))))
    np.testing.assert_array_equal(lazy(Tensor(M).pad((i(1), i(2)))), np.pad(M, ((0, 0), (1, 2))))
    np.testing.assert_array_equal(lazy(Tensor(M).shrink(((i(1), i(3)), None))), M[1:3])
    np.testing.assert_array_equal(lazy(Tensor(M).permute(np.array([1, 0]))), M.T)
    assert Tensor.zeros(np.array([2, 3])).shape == (2, 3)
    assert Tensor.zeros(np.array(3)).shape == (3,)  # a 0-d integer array is an integer (__index__)


def test_arange_values_and_indices_never_wrap():
    with pytest.raises(ValueError, match=r"arange values from 0 to 299 do not fit uint8"):
        Tensor.arange(300, dtype=dtypes.uint8)
    with pytest.raises(ValueError, match=r"arange values from 0 to 2147483648 do not fit int32"):
        Tensor.arange(0, 2**31 + 5, 2**30)
    # every value fits int8, but not every index 0..199: the indices are counted in int32
    t = Tensor.arange(100, -100, -1, dtype=dtypes.int8)
    assert t.dtype == dtypes.int8
    np.testing.assert_array_equal(t.numpy(), np.arange(100, -100, -1, dtype=np.int8))
    np.testing.assert_array_equal(Tensor.arange(10, 0, -3, dtype=dtypes.uint8).lazy_numpy(), [10, 7, 4, 1])
    iota = [u for u in Tensor.arange(3e9).uop.toposort() if u.op.name == "IOTA"]
    assert [u.dtype for u in iota] == [dtypes.int64]  # 3e9 indices: int32 would wrap


def test_cast_needs_a_dtype():
    with pytest.raises(TypeError, match="cast needs a dtype"):
        Tensor(M).cast(None)


def test_flip_with_no_axis_flips_every_axis_as_numpy():
    np.testing.assert_array_equal(lazy(Tensor(M).flip(None)), np.flip(M))


# ============================================================================ constants that do not fit


@pytest.mark.parametrize("value, dtype, want", [
    (300, dtypes.uint8, 44), (-1, dtypes.uint8, 255), (256, dtypes.uint8, 0), (128, dtypes.int8, -128),
    (2**40, dtypes.int32, 0), (2**31, dtypes.int32, -2**31), (2**70 + 5, dtypes.int32, 5),
    (-2**63 - 1, dtypes.int64, 2**63 - 1), (2**64 + 3, dtypes.uint64, 3), (2.9, dtypes.int32, 2),
    (-2.9, dtypes.int32, -2), (3, dtypes.bool, True), (2**1100, dtypes.float32, float("inf")),
])
def test_integer_constants_wrap_modulo_two_to_the_bits(value, dtype, want):
    """tinygrad's rule (a C cast): the value kept modulo 2**bits, in the dtype's range."""
    assert const_value(value, dtype) == want
    assert Tensor(value, dtype=dtype).uop.arg == want


def test_an_out_of_range_scalar_means_one_thing_to_every_evaluator():
    """`x + 300` on uint8 adds 300 wrapped to 44 (a C cast); `x < 300` compares with 300 itself, as numpy
    and tinygrad 0.14 do: True everywhere (it once compared with 44). The scheduler's bounds-based folding
    and both evaluators must agree."""
    x = Tensor(np.array([100, 30], np.uint8))
    for t, want in ((x < 300, [True, True]), (x + 300, [144, 74]), (Tensor.full((2,), 300, dtypes.uint8), [44, 44])):
        np.testing.assert_array_equal(t.numpy(), want)
        np.testing.assert_array_equal(t.lazy_numpy(), want)
    y = Tensor(np.array([5, -5], np.int32))
    np.testing.assert_array_equal((y < 2**40).numpy(), np.array([5, -5], np.int32) < 2**40)  # numpy's: all True
    np.testing.assert_array_equal((y + 2**70).numpy(), [5, -5])
    assert Tensor(2**70).numpy() == 0  # a Python int is int32 (tinygrad's default), wrapped


def test_python_data_beyond_int64():
    assert Tensor([2**63]).dtype == dtypes.uint64 and Tensor([2**63]).numpy()[0] == 2**63  # was -2**63
    np.testing.assert_array_equal(Tensor([[1, 2**70], [3, -2**70 - 1]], dtype="int32").numpy(), [[1, 0], [3, -1]])
    with pytest.raises(OverflowError, match=rf"Python int {2**70} does not fit int64"):
        Tensor([1, 2**70])


def test_python_float_data_into_an_integer_dtype_follows_the_constant_rule():
    """Truncated toward zero, then wrapped, as a scalar constant (numpy's astype gives INT_MIN for 1e10)."""
    data = [1.7, -2.7, 1e10, 3e9]
    want = [const_value(v, dtypes.int32) for v in data]
    assert want == [1, -2, 1410065408, -1294967296]
    np.testing.assert_array_equal(Tensor(data, dtype=dtypes.int32).numpy(), want)
    np.testing.assert_array_equal(Tensor([[300.5, -1.5]], dtype=dtypes.uint8).numpy(), [[44, 255]])
    with pytest.raises(ValueError, match="cannot convert inf to int64"):
        Tensor([1.0, float("inf")], dtype=dtypes.int64)


# ============================================================================ property: numpy agrees


_EXPECTED_WORDS = ("axis", "shape", "reshape", "expand", "permutation", "padding", "shrink", "matmul",
                   "cat", "stack", "empty sequence", "broadcast", "negative dimensions")


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001  the property compares exceptions
        return None, e


def _bad_leaf(arg) -> bool:
    """A bool, float, str or None where an integer belongs (arg is a tuple of those, nested)."""
    if isinstance(arg, tuple):
        return any(_bad_leaf(a) for a in arg)
    return isinstance(arg, bool) or not isinstance(arg, int)


def _same(rulec_fn, numpy_fn, typed: tuple = ()) -> None:
    """rulec's result equals numpy's, or both raise; rulec's error is a ValueError/TypeError/IndexError
    whose message names the argument, a TypeError where numpy's is. A non-integer among the `typed`
    arguments is a TypeError whatever else is wrong (numpy checks in order, rulec types first)."""
    got, err = _outcome(lambda: lazy(rulec_fn()))
    if _bad_leaf(typed):
        assert isinstance(err, TypeError), f"expected a TypeError for {typed!r}, got {err!r} / {got!r}"
        assert any(w in str(err) for w in _EXPECTED_WORDS), f"the message does not name the argument: {err}"
        return
    want, np_err = _outcome(numpy_fn)
    if np_err is None:
        assert err is None, f"numpy gives {want!r} but rulec raises {err!r}"
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        return
    assert err is not None, f"numpy raises {np_err!r} but rulec gives {got!r}"
    assert isinstance(err, (ValueError, TypeError, IndexError)), repr(err)
    assert isinstance(err, TypeError) == isinstance(np_err, TypeError), (err, np_err)
    assert any(w in str(err) for w in _EXPECTED_WORDS), f"the message does not name the argument: {err}"


_bad_int = st.sampled_from([1.0, 0.5, -1.5, True, "1", None])
_sizes = st.integers(0, 3)


def _int_or_bad(lo: int, hi: int):
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi), st.integers(lo, hi), _bad_int)


def _axis_or_bad(lo: int, hi: int):
    """np.expand_dims, np.swapaxes and np.stack take a bool axis (as 0 or 1); rulec never does."""
    return _int_or_bad(lo, hi).filter(lambda v: v is not None and not isinstance(v, bool))


@st.composite
def _tensor(draw, min_size: int = 0, max_ndim: int = 3):
    shape = tuple(draw(st.lists(st.integers(min_size, 3), max_size=max_ndim)))
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) * 0.75 - 2.0)
    x = x[draw(st.permutations(range(x.size)))] if x.size < 8 else x[::-1].copy()
    return x.reshape(shape)


def _axis_arg(ndim: int):
    one = _int_or_bad(-ndim - 1, ndim)
    return st.one_of(st.none(), one, st.tuples(one), st.tuples(one, one), st.tuples())


@settings(max_examples=examples(150), deadline=None)
@given(st.data())
def test_reduction_axes_match_numpy(data):
    x = data.draw(_tensor(min_size=1))  # numpy has no identity for max over nothing; rulec does (tinygrad)
    axis = data.draw(_axis_arg(x.ndim))
    keepdim = data.draw(st.booleans())
    name = data.draw(st.sampled_from(["sum", "max", "min", "mean", "prod"]))
    _same(lambda: getattr(Tensor(x), name)(axis=axis, keepdim=keepdim), lambda: _np_reduce(name, x, axis, keepdim),
          typed=() if axis is None else axis)


def _np_reduce(name: str, x: np.ndarray, axis, keepdim: bool):
    """numpy's sum and max take axis 0 (or -1) of a 0-d array, but not (0,), and mean takes neither;
    rulec takes them all (as tinygrad): a reduction of a 0-d tensor over its implicit axis is itself."""
    items = axis if isinstance(axis, tuple) else (axis,)
    if any(isinstance(a, bool) for a in items):
        raise TypeError("numpy's sum takes no bool axis (its mean does, as 0 or 1)")
    if x.ndim == 0 and axis is not None and items and \
            all(type(a) is int and a in (0, -1) for a in items) and len(set(a % 1 for a in items)) == len(items):
        axis = None
    return getattr(np, name)(x, axis=axis, keepdims=keepdim)


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_argmax_argmin_match_numpy(data):
    x = data.draw(_tensor())
    if x.size and data.draw(st.booleans()):
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = np.nan
    axis = data.draw(st.one_of(st.none(), _int_or_bad(-x.ndim - 1, x.ndim), st.tuples(st.integers(0, 1))))
    keepdim = data.draw(st.booleans())
    name = data.draw(st.sampled_from(["argmax", "argmin"]))
    _same(lambda: getattr(Tensor(x), name)(axis=axis, keepdim=keepdim),
          lambda: getattr(np, name)(x, axis=axis, keepdims=keepdim), typed=() if axis is None else axis)


def _np_reshape(x: np.ndarray, shape: tuple) -> np.ndarray:
    """numpy takes any negative size as the one to infer; rulec (as tinygrad) only -1."""
    if any(s < -1 for s in shape):
        raise ValueError("a size below -1")
    return np.reshape(x, shape)


def _np_expand(x: np.ndarray, shape: tuple) -> np.ndarray:
    """numpy has no -1 in broadcast_to: tinygrad's -1 keeps the (aligned) axis, or is 1 on a new one."""
    if any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) for s in shape):
        raise TypeError("expand takes integers")
    old = (1,) * (len(shape) - x.ndim) + x.shape
    return np.broadcast_to(x, tuple(o if s == -1 else s for o, s in zip(old, shape)) if len(shape) >= x.ndim else shape)


def _np_shrink(x: np.ndarray, arg: tuple) -> np.ndarray:
    """numpy slicing clamps; shrink does not: every bound must be an int with 0 <= start <= end <= size."""
    if any(isinstance(v, bool) or not isinstance(v, int) for p in arg for v in p):
        raise TypeError("shrink takes integers")
    if len(arg) != x.ndim:
        raise ValueError("bad shrink")
    for (b, e), s in zip(arg, x.shape):
        if not 0 <= b <= e <= s:
            raise ValueError("bad shrink")
    return x[tuple(slice(b, e) for b, e in arg)]


def _np_flatten(x: np.ndarray, start: int) -> np.ndarray:
    """Axes from `start` on merged into one (a 0-d tensor becomes (1,), as tinygrad)."""
    a = int(np.lib.array_utils.normalize_axis_index(start, max(x.ndim, 1)))
    if x.ndim == 0:
        return x.reshape(1)
    return x.reshape(x.shape[:a] + (int(np.prod(x.shape[a:])),))


def _np_pad(x: np.ndarray, pads: tuple) -> np.ndarray:
    if any(isinstance(v, bool) for p in pads for v in p):
        raise TypeError("padding takes integers")
    if len(pads) != x.ndim:
        raise ValueError("bad padding")
    return np.pad(x, pads) if pads else x  # np.pad takes no empty padding, even for a 0-d array


@settings(max_examples=examples(250), deadline=None)
@given(st.data())
def test_movement_arguments_match_numpy(data):
    x = data.draw(_tensor())
    n = x.ndim
    op = data.draw(st.sampled_from(["reshape", "expand", "permute", "flip", "transpose", "unsqueeze", "flatten",
                                    "shrink", "pad", "zeros", "cat", "stack", "matmul"]))
    t = Tensor(x)
    if op == "reshape":
        shape = tuple(data.draw(st.lists(_int_or_bad(-2, 6).filter(lambda v: v is not None), max_size=4)))
        _same(lambda: t.reshape(shape), lambda: _np_reshape(x, shape), shape)
    elif op == "expand":
        shape = tuple(data.draw(st.lists(_int_or_bad(-2, 3).filter(lambda v: v is not None), max_size=4)))
        _same(lambda: t.expand(shape), lambda: _np_expand(x, shape), shape)
    elif op == "permute":
        order = tuple(data.draw(st.lists(_int_or_bad(-n - 1, n).filter(lambda v: v is not None),
                                         min_size=max(n - 1, 0), max_size=n + 1)))
        _same(lambda: t.permute(order), lambda: np.transpose(x, order), order)
    elif op == "flip":
        axis = data.draw(st.one_of(_int_or_bad(-n - 1, n), st.tuples(st.integers(-n - 1, n))).filter(
            lambda a: not isinstance(a, bool) and a is not None))  # np.flip alone takes a bool axis
        _same(lambda: t.flip(axis), lambda: np.flip(x, axis), axis)
    elif op == "transpose":
        a, b = data.draw(_axis_or_bad(-n - 1, n)), data.draw(_axis_or_bad(-n - 1, n))
        _same(lambda: t.transpose(a, b), lambda: np.swapaxes(x, a, b), (a, b))
    elif op == "unsqueeze":
        d = data.draw(_axis_or_bad(-n - 2, n + 1))
        _same(lambda: t.unsqueeze(d), lambda: np.expand_dims(x, d), d)
    elif op == "flatten":
        a = data.draw(_int_or_bad(-n - 1, n))
        _same(lambda: t.flatten(a), lambda: _np_flatten(x, a), a)
    elif op == "shrink":
        arg = tuple((data.draw(_int_or_bad(-1, 4)), data.draw(_int_or_bad(-1, 4))) for _ in range(n + data.draw(st.integers(-1, 0))))
        _same(lambda: t.shrink(arg), lambda: _np_shrink(x, arg), arg)
    elif op == "pad":
        pads = tuple((data.draw(_int_or_bad(0, 2)), data.draw(_int_or_bad(0, 2))) for _ in range(n + data.draw(st.integers(-1, 1))))
        _same(lambda: t.pad(pads), lambda: _np_pad(x, pads), pads)
    elif op == "zeros":
        shape = tuple(data.draw(st.lists(_int_or_bad(-2, 3), max_size=3)))
        _same(lambda: Tensor.zeros(*shape), lambda: np.zeros(shape, np.float32), shape)
    elif op in ("cat", "stack"):
        y = data.draw(_tensor())
        d = data.draw(_axis_or_bad(-n - 2, n + 1))
        if op == "cat":
            _same(lambda: t.cat(Tensor(y), dim=d), lambda: np.concatenate([x, y], axis=d), d)
        else:
            _same(lambda: t.stack(Tensor(y), dim=d), lambda: np.stack([x, y], axis=d), d)
    else:
        y = data.draw(_tensor())
        _same(lambda: t @ Tensor(y), lambda: x @ y)
