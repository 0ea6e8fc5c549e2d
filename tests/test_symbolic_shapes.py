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
    with pytest.raises(IndexError, match="a symbolic slice takes no negative bounds"):
        x[-2:v]
    with pytest.raises(ValueError, match=r"cannot reshape \(\(BIND n 3\), 4\) to \(-1,\): with symbolic sizes"):
        x[:v].reshape(-1)
