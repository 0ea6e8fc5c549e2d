"""What tinygrad 0.14 training scripts (written in the style of tinygrad's examples/) reach for, run through
rulec.compat: each case is a small piece of such a script that once failed on rulec (a missing name, a
crash, a wrong value), checked against numpy or against the value tinygrad 0.14 prints."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import rulec.compat as compat


def _tinygrad_modules() -> dict[str, object]:
    return {n: m for n, m in sys.modules.items() if n == "tinygrad" or n.startswith("tinygrad.")}


@pytest.fixture
def tg():
    """The `tinygrad` package, served by rulec for the test."""
    before = _tinygrad_modules()
    compat.install()
    try:
        import tinygrad

        yield tinygrad
    finally:
        compat.uninstall()
    assert _tinygrad_modules() == before


# ------------------------------------------------------------------ names scripts import


def test_dtypes_from_the_modules_that_import_it(tg):
    # examples/gpt.py: `from tinygrad.tensor import Tensor, dtypes`; tinygrad's nn, optim and state modules
    # import dtypes and Tensor too, and scripts take them from there
    from tinygrad.nn import dtypes as nn_dtypes
    from tinygrad.nn.optim import Tensor as OptimTensor, dtypes as optim_dtypes
    from tinygrad.nn.state import Tensor as StateTensor
    from tinygrad.tensor import Tensor, Variable, dtypes

    assert dtypes is nn_dtypes is optim_dtypes is tg.dtypes
    assert Tensor is OptimTensor is StateTensor is tg.Tensor
    assert Tensor([1, 2], dtype=dtypes.int64).dtype == dtypes.int64
    assert Variable("n", 1, 4).bind(2).shape == ()


def test_pure_helpers(tg):
    # beautiful_cifar: `partition(state_dict.items(), lambda x: 'bias' in x[0])`
    from tinygrad.helpers import (all_int, argfix, argsort, ceildiv, fully_flatten, get_child, get_single_element,
                                  make_tuple, merge_dicts, next_power2, partition, pluralize, round_down, round_up,
                                  to_tuple, unwrap)

    yes, no = partition([("a.bias", 1), ("a.weight", 2), ("b.bias", 3)], lambda kv: "bias" in kv[0])
    assert yes == [("a.bias", 1), ("b.bias", 3)] and no == [("a.weight", 2)]
    assert unwrap(0) == 0
    with pytest.raises(ValueError):
        unwrap(None)
    assert make_tuple(3, 2) == (3, 3) and make_tuple([1, 2], 2) == (1, 2)
    assert to_tuple(1) == (1,) and to_tuple((1, 2)) == (1, 2)
    assert argfix((2, 3)) == (2, 3) and argfix(2, 3) == (2, 3) and argfix([4]) == (4,)
    with pytest.raises(ValueError):
        argfix((2, 3), 4)
    assert argsort([3, 1, 2]) == [1, 2, 0] and argsort((2, 1)) == (1, 0)
    assert all_int((1, 2)) and not all_int((1, 2.0))
    assert (ceildiv(7, 2), ceildiv(-7, 2), ceildiv(7.0, 2)) == (4, -3, 4) and isinstance(ceildiv(7.0, 2), int)
    assert (round_up(7, 4), round_up(8, 4), round_down(7, 4)) == (8, 8, 4)
    assert [next_power2(x) for x in (0, 1, 2, 3, 5, 8)] == [1, 1, 2, 4, 8, 8]
    assert fully_flatten([[1, [2]], np.array([[3, 4]]), np.array(5)]) == [1, 2, 3, 4, 5]
    model = {"layers": [None, {"w": 7}]}
    assert get_child(model, "layers.1.w") == 7
    assert merge_dicts([{"a": 1}, {"b": 2}, {"a": 1}]) == {"a": 1, "b": 2}
    with pytest.raises(ValueError):
        merge_dicts([{"a": 1}, {"a": 2}])
    assert get_single_element([9]) == 9
    assert pluralize("kernel", 1) == "1 kernel" and pluralize("kernel", 3) == "3 kernels"


# ------------------------------------------------------------------ Tensor methods


def test_replace_rebinds_the_tensor_object(tg):
    # beautiful_cartpole-style weight loading: `p.replace(Tensor(numpy_values))` (tinygrad 0.14's Tensor.replace)
    Tensor = tg.Tensor
    w = Tensor.ones(2, 3)
    y = w * 2  # built before the replace: keeps reading the old value (nothing is written)
    new = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert w.replace(Tensor(new)) is w
    np.testing.assert_equal(w.numpy(), new)
    np.testing.assert_equal(y.numpy(), np.full((2, 3), 2.0))
    assert w.replace(Tensor(new.astype(np.int32))).dtype == tg.dtypes.int32  # dtype may change
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(3, 2\)"):
        w.replace(Tensor.zeros(3, 2))


def test_replace_then_train(tg):
    # the replaced tensor is what the optimizer trains and what gradients reach
    Tensor, nn = tg.Tensor, tg.nn
    layer = nn.Linear(3, 1, bias=False)
    layer.weight.replace(Tensor([[1.0, 2.0, 3.0]]))
    opt = nn.optim.SGD([layer.weight], lr=0.1)
    x = Tensor([[1.0, 1.0, 1.0]])
    with tg.Context(TRAINING=1):
        opt.zero_grad()
        layer(x).sum().backward()
        opt.step()
    np.testing.assert_allclose(layer.weight.numpy(), [[0.9, 1.9, 2.9]], rtol=1e-6)


# ------------------------------------------------------------------ TinyJit inputs


def test_jit_takes_contiguous_rows_at_each_offset(tg):
    # beautiful_cifar: `train_step(tidxs[epoch_step].contiguous())`, one row of a realized index table per
    # call; contiguous() keeps such a row a view here, and the row's offset must not count as another view
    rows = tg.Tensor(np.arange(12, dtype=np.int32)).reshape(3, 4).realize()
    step = tg.TinyJit(lambda x: (x * 2).realize())
    got = [step(rows[i].contiguous()).tolist() for i in range(3)]
    assert got == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]]
    with pytest.raises(tg.engine.jit.JitError, match="args mismatch"):
        step(rows[:, :2].contiguous().reshape(2, 3)[:, :2].reshape(4))  # a strided view is another view


# ------------------------------------------------------------------ a lazy loss read after the step


def test_loss_read_after_the_optimizer_step_reads_the_updated_weights(tg):
    # examples in tinygrad's style print `loss.numpy()` after `opt.step()` (serious_mnist, gpt): the loss is
    # lazy, so (as in tinygrad 0.14) it is computed then, from the updated weights. Values the step stored
    # on the way (the hidden layer, computed from the old weights) must not be mixed in.
    Tensor, nn = tg.Tensor, tg.nn
    rng = np.random.default_rng(9)
    wn, fcn = rng.uniform(-0.4, 0.4, (3, 4)).astype(np.float32), rng.uniform(-0.4, 0.4, (4, 2)).astype(np.float32)
    xn = rng.standard_normal((5, 3)).astype(np.float32)
    w, fc, x = Tensor(wn), Tensor(fcn), Tensor(xn)
    opt = nn.optim.SGD([w, fc], lr=0.5)

    def model(w_, fc_):
        h = (x @ w_).relu().sum(axis=1, keepdim=True) * Tensor.ones(1, 4)
        return (h @ fc_).log_softmax().mean()

    with tg.Context(TRAINING=1):
        loss = model(w, fc)
        opt.zero_grad()
        loss.backward()
        opt.step()
    w_new, fc_new = w.numpy(), fc.numpy()
    expected = model(Tensor(w_new), Tensor(fc_new)).item()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)
    # the step itself used the old weights: the update is the gradient there
    h = np.maximum(xn @ wn, 0).sum(1, keepdims=True) * np.ones((1, 4), np.float32)
    assert not np.allclose(fc_new, fcn)
    assert np.isfinite(h).all()


def test_a_tensor_realized_with_the_step_keeps_the_old_weights_value(tg):
    # `Tensor.realize(loss, *opt.schedule_step())`: the loss realized together with the update is the loss
    # of the weights the gradient was taken at
    Tensor, nn = tg.Tensor, tg.nn
    w = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    opt = nn.optim.SGD([w], lr=0.1)
    with tg.Context(TRAINING=1):
        loss = (w * w).sum()
        loss.backward()
        Tensor.realize(loss, *opt.schedule_step())
    assert loss.item() == pytest.approx(14.0)
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6, 2.4], rtol=1e-6)


def test_gradient_reaches_through_a_tensor_whose_values_were_read(tg):
    # examples/custom_function.py: `c = f(a, b); check(c.numpy()); c.mean().backward(); a.grad`; reading c
    # stores it, and an op on c afterwards must still differentiate through what c was computed from
    Tensor = tg.Tensor
    an = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    bn = np.array([[2.0, 1.0], [-1.0, 4.0]], np.float32)
    a, b = Tensor(an).permute(1, 0), Tensor(bn).permute(1, 0)
    c = a * b + a
    np.testing.assert_allclose(c.numpy(), an.T * bn.T + an.T)
    d = c.exp()  # read too, then used
    d.numpy()
    (d.mean() + c.sum()).backward()
    ea = np.exp(an.T * bn.T + an.T)
    np.testing.assert_allclose(a.grad.numpy(), ea * (bn.T + 1) / 4 + (bn.T + 1), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), ea * an.T / 4 + an.T, rtol=1e-5)
    assert c.grad is not None and d.grad is not None
