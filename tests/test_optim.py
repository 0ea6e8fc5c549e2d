"""rulec.nn.optim against float64 numpy (issue 11 §2), and a few training steps of a small MLP whose losses
equal a float64 numpy implementation of the same model and optimizer (§6)."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, nn
from rulec.nn.optim import SGD, Adam, AdamW
from rulec.nn.state import get_parameters

rng = np.random.default_rng(11)


def _steps(make, update, steps=3):
    """Run `make(params)` optimizer for a few steps on a fixed quadratic loss; compare the parameters with
    `update(p, g, state)` in float64 numpy after each step."""
    p0 = rng.standard_normal((3, 4))
    target = rng.standard_normal((3, 4))
    p = Tensor(p0.astype(np.float64)).realize()
    opt = make([p])
    ref, state = p0.copy(), {}
    for _ in range(steps):
        opt.zero_grad()
        loss = ((p - Tensor(target)) ** 2).sum()
        loss.backward()
        opt.step()
        ref = update(ref, 2 * (ref - target), state)
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-9, atol=1e-12)


def test_sgd_plain_momentum_nesterov_weight_decay():
    _steps(lambda ps: SGD(ps, lr=0.1), lambda p, g, s: p - 0.1 * g)

    def momentum(nesterov, wd):
        def update(p, g, s):
            g = g + wd * p
            s["b"] = 0.9 * s.get("b", 0) + g
            return p - 0.05 * ((g + 0.9 * s["b"]) if nesterov else s["b"])
        return update

    for nesterov in (False, True):
        _steps(lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=nesterov, weight_decay=0.01),
               momentum(nesterov, 0.01))


def _adam(wd):
    def update(p, g, s):
        t = s["t"] = s.get("t", 0) + 1
        s["m"] = 0.9 * s.get("m", 0) + 0.1 * g
        s["v"] = 0.999 * s.get("v", 0) + 0.001 * g * g
        up = (s["m"] / (1 - 0.9 ** t)) / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-8) + wd * p
        return p - 0.01 * up
    return update


def test_adam_and_adamw():
    _steps(lambda ps: Adam(ps, lr=0.01), _adam(0.0))
    _steps(lambda ps: AdamW(ps, lr=0.01, weight_decay=0.1), _adam(0.1))


def test_schedule_step_and_errors():
    p = Tensor(np.ones(3, np.float32)).realize()
    opt = SGD([p], lr=0.5, momentum=0.9)
    with pytest.raises(RuntimeError, match="no gradient"):
        opt.step()
    (p * 2).sum().backward()
    realized = opt.schedule_step()
    assert realized[0] is p and len(realized) == 2  # the parameter and its momentum
    Tensor.realize(*realized)
    np.testing.assert_allclose(p.numpy(), 0.0)
    opt.zero_grad()
    assert p.grad is None


def _mlp_numpy(params, x, y, steps, lr):
    """The same MLP and Adam in float64 numpy, with hand-written gradients; returns the losses."""
    w1, b1, w2, b2 = (a.astype(np.float64) for a in params)
    state = [{} for _ in range(4)]
    losses = []
    for _ in range(steps):
        h = x @ w1.T + b1
        a = np.maximum(h, 0)
        logits = a @ w2.T + b2
        z = logits - logits.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        n = x.shape[0]
        losses.append(-logp[np.arange(n), y].mean())
        d = np.exp(logp)
        d[np.arange(n), y] -= 1
        d /= n
        gw2, gb2 = d.T @ a, d.sum(0)
        da = (d @ w2) * (h > 0)
        gw1, gb1 = da.T @ x, da.sum(0)
        w1, b1, w2, b2 = (_adam_lr(lr)(p, g, state[k])
                          for k, (p, g) in enumerate(zip((w1, b1, w2, b2), (gw1, gb1, gw2, gb2))))
    return losses


def _adam_lr(lr):
    def update(p, g, s):
        t = s["t"] = s.get("t", 0) + 1
        s["m"] = 0.9 * s.get("m", 0) + 0.1 * g
        s["v"] = 0.999 * s.get("v", 0) + 0.001 * g * g
        return p - lr * (s["m"] / (1 - 0.9 ** t)) / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-8)
    return update


class _MLP:
    def __init__(self):
        self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


def test_a_small_mlp_trains_as_float64_numpy_does():
    model = _MLP()
    x = rng.standard_normal((32, 8))
    y = rng.integers(0, 4, 32)
    start = [t.numpy() for t in (model.l1.weight, model.l1.bias, model.l2.weight, model.l2.bias)]
    for t in get_parameters(model):  # train in float64, so the comparison is exact to rounding
        t.uop = t.cast("float64").realize().uop
    opt = Adam(get_parameters(model), lr=0.01)
    xt, onehot = Tensor(x), Tensor(np.eye(4)[y])
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = -(model(xt).log_softmax(-1) * onehot).sum(1).mean()
        loss.backward()
        # the loss and the update in one realize (as tinygrad scripts do): the loss reads the parameters
        # before this step's update, which the schedule orders after every read of them
        Tensor.realize(loss, *opt.schedule_step())
        losses.append(float(loss.numpy()))
    want = _mlp_numpy(start, x, y, 5, 0.01)
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    assert losses[-1] < losses[0]


def test_sgd_on_parameters_that_read_each_other_over_several_steps():
    """Each update reads the other parameter's value from before the step, in every step (a realized
    parameter is a reshape of a reshape of its buffer; assigning to it once read as an assign through a
    view, which every reader, the other update included, saw)."""
    a0, b0 = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    a, b = Tensor(a0).realize(), Tensor(b0).realize()
    opt = SGD([a, b], lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        (a * b).sum().backward()
        opt.step()
        a0, b0 = a0 - 0.1 * b0, b0 - 0.1 * a0
        np.testing.assert_allclose(a.numpy(), a0, rtol=1e-12)
        np.testing.assert_allclose(b.numpy(), b0, rtol=1e-12)


def test_tinyjit_runs_a_train_step_and_realizes_what_it_returns():
    from rulec import TinyJit

    p = Tensor(np.array([3.0])).realize()
    opt = SGD([p], lr=0.1)

    @TinyJit
    def step(target):
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        return (loss, *opt.schedule_step())

    losses = [step(Tensor([1.0]))[0] for _ in range(3)]
    assert all(all(x.op.name in ("BUFFER", "RESHAPE", "UNIQUE", "DEVICE") for x in t.uop.toposort()) for t in losses)
    np.testing.assert_allclose([float(t.numpy()) for t in losses], [4.0, 2.56, 1.6384], rtol=1e-12)
    assert step.cnt == 3 and step.__name__ == "step"
