"""Symbolic shapes: one variable dimension, bound per run (DEFINE_VAR + BIND)."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

DATA = np.arange(40, dtype=np.float32).reshape(10, 4)


def realized(a):
    t = Tensor(a)
    t.realize()
    return t


@pytest.mark.parametrize("n", [1, 3, 10])
def test_sum_over_variable_length_axis(n):
    v = UOp.variable("n", 1, 10).bind(n)
    out = realized(DATA).shrink(((0, v), None)).sum(0)
    items = Tensor.schedule(out)
    assert len(items) == 1
    assert any(u.op is Ops.DEFINE_VAR for u in items[0].ast.toposort())
    np.testing.assert_allclose(out.numpy(), DATA[:n].sum(0))


def test_one_kernel_serves_every_value():
    asts = set()
    for n in (2, 7):
        v = UOp.variable("n", 1, 10).bind(n)
        items = Tensor.schedule(realized(DATA).shrink(((0, v), None)).sum(0))
        assert [b.src[1].arg for b in items[0].bound_vars] == [n]
        asts.add(items[0].ast)
    assert len(asts) == 1  # the value lives in the BIND, not in the kernel


def test_elementwise_on_a_symbolic_shape():
    v = UOp.variable("n", 1, 10).bind(4)
    x = realized(DATA[:, 0].copy()).shrink(((0, v),))
    out = x * 2 + 1
    assert out.shape == (v,)
    assert len(Tensor.schedule(out)) == 1
    np.testing.assert_allclose(out.numpy(), DATA[:4, 0] * 2 + 1)


def test_binding_out_of_range_is_an_error():
    with pytest.raises(ValueError, match=r"n=11 is outside its range \[1, 10\]"):
        UOp.variable("n", 1, 10).bind(11)


@pytest.mark.parametrize("n", [1, 3, 10])
def test_slicing_with_a_bound_variable_as_tinygrad_scripts_do(n):
    v = UOp.variable("n", 1, 10).bind(n)
    x = realized(DATA)
    assert x[:v].shape == (v, 4)
    np.testing.assert_array_equal(x[:v].sum(0).numpy(), DATA[:n].sum(0))
    np.testing.assert_array_equal(x[:v, 1].numpy(), DATA[:n, 1])             # an int drops a constant axis
    np.testing.assert_array_equal(x[None, :v, 1:3].numpy(), DATA[None, :n, 1:3])
    np.testing.assert_array_equal(x[:v].reshape(v, 2, 2).sum(1).numpy(), DATA[:n].reshape(n, 2, 2).sum(1))
    np.testing.assert_array_equal(x[:v].reshape(v, -1, 2)[:, 1].numpy(), DATA[:n].reshape(n, 2, 2)[:, 1])


def test_symbolic_slices_and_reshapes_that_cannot_be_done_say_why():
    v = UOp.variable("n", 1, 10).bind(3)
    x = realized(DATA)
    with pytest.raises(IndexError, match="a symbolic slice takes step 1"):
        x[:v:2]
    with pytest.raises(IndexError, match="a negative bound and a symbolic one in one slice are not taken"):
        x[-2:v]
    with pytest.raises(ValueError, match=r"cannot reshape \(\(BIND n 3\), 4\) to \(-1,\): with symbolic sizes"):
        x[:v].reshape(-1)


def test_mean_and_var_over_a_symbolic_axis_divide_by_the_bound_value():
    # the count was int(shape), a TypeError on a bound variable; it is the binding's value at run time
    asts = set()
    for n in (1, 3, 10):
        v = UOp.variable("n", 1, 10).bind(n)
        x = realized(DATA)[:v]
        np.testing.assert_allclose(x.mean(0).numpy(), DATA[:n].mean(0), rtol=1e-6)
        np.testing.assert_allclose(x.mean().numpy(), DATA[:n].mean(), rtol=1e-6)
        np.testing.assert_allclose(x.var(0, correction=0).numpy(), DATA[:n].var(0), rtol=1e-5)
        if n > 1:
            np.testing.assert_allclose(x.std(0).numpy(), DATA[:n].std(0, ddof=1), rtol=1e-5)
        asts.update(item.ast for item in Tensor.schedule(x.mean(0)))
    assert len(asts) == 1


def test_one_variable_bound_to_two_values_in_one_kernel_is_an_error():
    # one DEFINE_VAR in the kernel, two BINDs: it ran with one of the values for both parts
    x = realized(DATA)
    a, b = x[:UOp.variable("n", 1, 10).bind(2)].sum(0), x[:UOp.variable("n", 1, 10).bind(5)].sum(0)
    with pytest.raises(ValueError, match="variable 'n' is bound to 2 and to 5 in one kernel"):
        (a + b).realize()
    Tensor.realize(a, b)  # two kernels, each with its own value
    np.testing.assert_array_equal(a.numpy(), DATA[:2].sum(0))
    np.testing.assert_array_equal(b.numpy(), DATA[:5].sum(0))


@pytest.mark.parametrize("n", [1, 3, 10])
def test_an_int_index_and_a_pad_on_a_symbolic_axis(n):
    # both compared a bound variable with an int (`0 <= i < size`): "a UOp has no truth value"
    v = UOp.variable("n", 1, 10).bind(n)
    x = realized(DATA)[:v]
    np.testing.assert_array_equal((x * 2)[0, 1:3].numpy(), DATA[0, 1:3] * 2)
    np.testing.assert_array_equal(x.pad(((1, 2), (0, 1))).sum(0).numpy(), np.pad(DATA[:n], ((1, 2), (0, 1))).sum(0))
    np.testing.assert_array_equal(x.pad(((-1, 0), None)).sum(0).numpy(), DATA[1:n].sum(0))
    with pytest.raises(IndexError, match=r"index 1 on the symbolic axis 0 .*only -1 <= index < 1"):
        x[1]
    with pytest.raises(ValueError, match="bad padding"):
        x.pad(((-1, -1), None))


@pytest.mark.parametrize("n", [1, 4, 10])
def test_a_flip_of_a_symbolic_axis_is_proven_in_bounds(n):
    # buf[(n - 1 - r) * 4 + c] for r < n: the exact bounds check ran r up to 9 whatever n was, and
    # found -36 ("unsafe kernel"); a lane past its loop's own end never runs
    v = UOp.variable("n", 1, 10).bind(n)
    x = realized(DATA)[:v]
    np.testing.assert_array_equal(x.flip(0).sum(0).numpy(), DATA[:n][::-1].sum(0))
    want = (DATA[:n][::-1] * np.arange(4)).max(0)
    np.testing.assert_array_equal((x.flip(0) * Tensor.arange(4)).max(0).numpy(), want)


@pytest.mark.parametrize("n", [1, 3, 10])
def test_an_assign_to_a_symbolic_slice_writes_the_base(n):
    # the value goes back into the base through a PAD of `10 - n` rows, whose validity compared a bound
    # variable with 0 in the scheduler ("a UOp has no truth value")
    v = UOp.variable("n", 1, 10).bind(n)
    a = realized(DATA.copy())
    a[:v].assign(a[:v] * 2)
    a[:v, 1:3].assign(a[:v, 1:3] + 1)
    want = DATA.copy()
    want[:n] *= 2
    want[:n, 1:3] += 1
    np.testing.assert_array_equal(a.numpy(), want)
