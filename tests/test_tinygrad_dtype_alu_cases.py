"""ALU ops per dtype in the style of tinygrad's test_dtype_alu, each checked against numpy on every
backend that runs here. The programs are our own; numpy computes every expected value."""
from __future__ import annotations

import numpy as np
import pytest

from opencl_probe import CL
from rulec import Tensor, dtypes

RUNNING_DEVICES = ["CPU", CL]


# ------------------------------------------------------------------ unsigned division

@pytest.mark.parametrize("device", RUNNING_DEVICES)
@pytest.mark.parametrize("dt,nd", [(dtypes.uint32, np.uint32), (dtypes.uint64, np.uint64)])
def test_unsigned_divisor_of_all_ones_is_not_minus_one(device, dt, nd):
    # the all-ones bit pattern is the largest unsigned value: x // max is 0 or 1 and x % max is x or 0
    top = np.iinfo(nd).max
    a = np.array([133851674, 5, top, 0, top - 1], nd)
    b = np.full(a.shape, top, nd)
    ta, tb = Tensor(a, dtype=dt, device=device), Tensor(b, dtype=dt, device=device)
    np.testing.assert_array_equal((ta % tb).numpy(), a % b)
    np.testing.assert_array_equal((ta // tb).numpy(), a // b)


# ------------------------------------------------------------------ signed overflow wraps

@pytest.mark.parametrize("device", RUNNING_DEVICES)
@pytest.mark.parametrize("dt,nd", [(dtypes.int32, np.int32), (dtypes.int64, np.int64)])
def test_signed_overflow_wraps_where_a_compiler_could_assume_it_does_not(device, dt, nd):
    # signed overflow is undefined in C: a compiler may fold `x + 1 < x` and `x - 1 > x` to false.
    # The kernels compute int32 and int64 through the unsigned type of their width, so they wrap, as
    # numpy does, with no compiler flag to rely on
    info = np.iinfo(nd)
    a = np.array([info.max, info.min, 0, -1, info.max - 1], nd)
    t = Tensor(a, dtype=dt, device=device)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((t + 1 < t).numpy(), (a + nd(1)) < a)
        np.testing.assert_array_equal((-t > 0).numpy(), -a > 0)  # -min is min
        np.testing.assert_array_equal((t - 1 > t).numpy(), (a - nd(1)) > a)


# ------------------------------------------------------------------ x ** 0.5

@pytest.mark.parametrize("dt,nd", [(dtypes.float16, np.float16), (dtypes.float32, np.float32), (dtypes.float64, np.float64)])
def test_pow_of_a_half_is_numpys_sqrt_at_the_edges(dt, nd):
    # numpy's `**` computes x ** 0.5 as sqrt: nan at -inf and -0.0 at -0.0, where C's pow gives inf and 0.0
    x = np.array([-np.inf, -4.0, -0.0, 0.0, 2.0, np.inf, np.nan], nd)
    with np.errstate(invalid="ignore"):
        want = x ** 0.5
    got = (Tensor(x, dtype=dt) ** 0.5).numpy()
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[2])


# ------------------------------------------------------------------ float16 selects compile

@pytest.mark.parametrize("n", [3, 10, 64])
@pytest.mark.parametrize("op", ["relu", "maximum", "clip", "where"])
def test_float16_selects_compile_and_match_numpy(op, n):
    # a float16 select of a constant is code some toolchains cannot build natively (GNU as 2.40 rejects the
    # masked vmovsh gcc 12 emits for AVX512-FP16 on a short loop)
    x = np.linspace(-3, 3, n).astype(np.float16)
    y = x[::-1].copy()
    t, u = Tensor(x), Tensor(y)
    got, want = {
        "relu": (lambda: t.relu(), lambda: np.maximum(x, np.float16(0))),
        "maximum": (lambda: t.maximum(u), lambda: np.maximum(x, y)),
        "clip": (lambda: t.clip(-1, 2), lambda: np.clip(x, np.float16(-1), np.float16(2))),
        "where": (lambda: (t > u).where(t, u), lambda: np.where(x > y, x, y)),
    }[op]
    np.testing.assert_array_equal(got().numpy(), want())


# ------------------------------------------------------------------ a negative infinity after a minus

@pytest.mark.parametrize("device", RUNNING_DEVICES)
def test_subtracting_negative_infinity_compiles(device):
    # `a - -INFINITY` written without parentheses is `a--INFINITY`: a decrement, which does not compile
    ninf = float("-inf")
    x = Tensor([1.0, -2.0], device=device)
    np.testing.assert_array_equal((x - ninf).numpy(), [np.inf, np.inf])
    scalar = Tensor(0.0, dtype=dtypes.float32, device=device) - Tensor(ninf, dtype=dtypes.float32, device=device)
    assert scalar.item() == np.inf


# ------------------------------------------------------------------ the sign of a zero constant

@pytest.mark.parametrize("first", [0.0, -0.0])
def test_zero_and_negative_zero_constants_stay_apart(first):
    # 0.0 == -0.0 in Python, but dividing by them gives infinities of opposite signs; whichever constant is
    # built first must not stand for the other
    x = np.array([np.inf, 1.0, -2.0], np.float32)
    second = -first
    with np.errstate(divide="ignore"):
        a = (Tensor(x) / first).numpy()
        b = (Tensor(x) / second).numpy()
        np.testing.assert_array_equal(a, x / np.float32(first))
        np.testing.assert_array_equal(b, x / np.float32(second))
    assert np.signbit(Tensor.full((2,), second).numpy()).tolist() == [np.signbit(second)] * 2


def test_subtracting_negative_zero_is_not_the_identity():
    # -0.0 - (-0.0) is 0.0: only x - 0.0 is x for every float
    x = np.array([-0.0, 1.0], np.float32)
    got = (Tensor(x) - (-0.0)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x - np.float32(-0.0)))
    w = Tensor(x).contiguous().realize()
    w.assign(w - (-0.0)).realize()
    np.testing.assert_array_equal(np.signbit(w.numpy()), [False, False])


# ------------------------------------------------------------------ signed wrap-around with a constant

@pytest.mark.parametrize("device", RUNNING_DEVICES)
@pytest.mark.parametrize("nd", [np.int32, np.int64])
def test_signed_arithmetic_with_the_most_negative_constant_wraps(device, nd):
    # numpy wraps; OpenCL C leaves signed overflow undefined, and PoCL reassociated `x + INT_MIN` into garbage
    low = int(np.iinfo(nd).min)
    a = np.array([low, low + 1, 5, -1, 7], nd)
    x = Tensor(a, device=device)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((x + low).numpy(), a + nd(low))
        np.testing.assert_array_equal((low - x).numpy(), nd(low) - a)
        np.testing.assert_array_equal((x * 3).numpy(), a * nd(3))
        np.testing.assert_array_equal((-x).numpy(), -a)
