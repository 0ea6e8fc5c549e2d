"""Autograd (issue 11 §1): rules/gradient.yaml and runtime/tensor/autograd.py, against central finite
differences of float64 numpy implementations of the same functions.

Tolerance scheme: inputs are float64 tensors, so the gradients rulec computes (compiled kernels on the
default device) are float64 too; a central difference with h = 1e-6 has an error of about h^2 |f'''| +
eps |f| / h, well below the rtol 1e-5 / atol 1e-6 used here. Inputs avoid kinks (ties of max, zeros of
sqrt/log) by construction; the kinks themselves are checked against tinygrad 0.14's conventions below.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.tensor.autograd import GradientError, compute_gradients
from rulec.runtime.tensor.tensor import Tensor

H = 1e-6
RTOL, ATOL = 1e-5, 1e-6


def numeric_grads(f, xs: list[np.ndarray], weights: np.ndarray) -> list[np.ndarray]:
    """d sum(f(xs) * weights) / d xs by central differences, in float64."""
    out = []
    for k, x in enumerate(xs):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            plus, minus = [a.copy() for a in xs], [a.copy() for a in xs]
            plus[k][i] += H
            minus[k][i] -= H
            g[i] = (np.sum(f(*plus) * weights) - np.sum(f(*minus) * weights)) / (2 * H)
        out.append(g)
    return out


def check(f_t, f_np, *xs: np.ndarray, rtol: float = RTOL, atol: float = ATOL, seed: int = 0) -> None:
    """rulec's gradient of sum(f(xs) * w) for random weights w equals the finite difference of numpy's f."""
    xs = [np.asarray(x, np.float64) for x in xs]
    w = np.random.default_rng(seed).standard_normal(np.shape(f_np(*xs)))
    ts = [Tensor(x) for x in xs]
    got = f_t(*ts).gradient(*ts, gradient=Tensor(w))
    for k, (g, want) in enumerate(zip(got, numeric_grads(f_np, xs, w))):
        assert g.dtype == dtypes.float64 and g.shape == xs[k].shape
        np.testing.assert_allclose(g.numpy(), want, rtol=rtol, atol=atol, err_msg=f"input {k}")


rng = np.random.default_rng(1)


def normal(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(*shape):
    return positive(*shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape):
    """Values at least 0.05 apart: no ties, and no tie within a finite-difference step."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 + rng.uniform(0, 0.05, n)).reshape(shape) - n * 0.05


# ------------------------------------------------------------------ every differentiable op

UNARY = {
    "neg": (lambda x: -x, lambda x: -x, normal),
    "reciprocal": (lambda x: x.reciprocal(), lambda x: 1 / x, away_from_zero),
    "exp2": (lambda x: x.exp2(), np.exp2, normal),
    "log2": (lambda x: x.log2(), np.log2, positive),
    "sin": (lambda x: x.sin(), np.sin, normal),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, positive),
    "exp": (lambda x: x.exp(), np.exp, normal),
    "log": (lambda x: x.log(), np.log, positive),
    "cos": (lambda x: x.cos(), np.cos, normal),
    "tanh": (lambda x: x.tanh(), np.tanh, normal),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), normal),
    "square": (lambda x: x.square(), np.square, normal),
    "abs": (lambda x: x.abs(), np.abs, away_from_zero),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), away_from_zero),
    "trunc-free-sign": (lambda x: x.sign() * x, lambda x: np.sign(x) * x, away_from_zero),
    "contiguous": (lambda x: x.contiguous() * 2, lambda x: x * 2, normal),
    "cast-roundtrip": (lambda x: x.cast(dtypes.float64) * 3, lambda x: x * 3, normal),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    f_t, f_np, data = UNARY[name]
    check(f_t, f_np, data(3, 4))


BINARY = {
    "add": (lambda a, b: a + b, np.add, normal, normal),
    "sub": (lambda a, b: a - b, np.subtract, normal, normal),
    "mul": (lambda a, b: a * b, np.multiply, normal, normal),
    "div": (lambda a, b: a / b, np.divide, normal, away_from_zero),
    "maximum": (lambda a, b: a.maximum(b), np.maximum, lambda *s: distinct(*s), lambda *s: distinct(*s)[::-1]),
    "minimum": (lambda a, b: a.minimum(b), np.minimum, lambda *s: distinct(*s), lambda *s: distinct(*s)[::-1]),
    "pow": (lambda a, b: a ** b, np.power, positive, normal),
    "same-source": (lambda a, b: a * a + b, lambda a, b: a * a + b, normal, normal),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name):
    f_t, f_np, da, db = BINARY[name]
    check(f_t, f_np, da(3, 4), db(3, 4))


def test_broadcasting_sums_the_expanded_axes():
    check(lambda a, b: a * b + a, lambda a, b: a * b + a, normal(3, 1), normal(1, 4))
    check(lambda a, b: a.expand(2, 3, 4) * b, lambda a, b: np.broadcast_to(a, (2, 3, 4)) * b, normal(3, 1), normal(2, 3, 4))


def test_where_selects_the_gradient():
    cond = rng.random((3, 4)) > 0.5
    check(lambda a, b: Tensor(cond).where(a, b), lambda a, b: np.where(cond, a, b), normal(3, 4), normal(3, 4))
    check(lambda a: (a > 0).where(a * a, -a), lambda a: np.where(a > 0, a * a, -a), away_from_zero(3, 4))


def test_comparisons_have_no_gradient():
    x = Tensor(normal(3))
    y = Tensor(normal(3))
    gx, gy = ((x < y).cast(dtypes.float64) * 2 + (x == y).cast(dtypes.float64)).sum().gradient(x, y)
    assert gx.numpy().tolist() == [0.0] * 3 and gy.numpy().tolist() == [0.0] * 3


def test_cast_float32_gradient():
    # float32 in the middle: the finite difference is taken with a larger step, at float32's precision
    x = normal(3, 4)
    t = Tensor(x)
    (g,) = (t.cast(dtypes.float32).sin() * 3).cast(dtypes.float64).sum().gradient(t)
    assert g.dtype == dtypes.float64
    np.testing.assert_allclose(g.numpy(), 3 * np.cos(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 5e-7), (np.float64, 1e-15)])
def test_sin_and_cos_gradients_at_large_arguments(dtype, tol):
    # the rule took sin(pi/2 - x): float32's d/dx sin at 1e6 was 0.9396, numpy's cos(1e6) 0.93675
    x = np.array([0.3, -2.0, 1e3, 1e6, -3e5, 12345.678], dtype=dtype)
    t = Tensor(x)
    (gs,) = t.sin().sum().gradient(t)
    (gc,) = t.cos().sum().gradient(t)
    np.testing.assert_allclose(gs.numpy(), np.cos(x.astype(np.float64)), rtol=0, atol=tol)
    np.testing.assert_allclose(gc.numpy(), -np.sin(x.astype(np.float64)), rtol=0, atol=4 * tol)


REDUCE = {
    "sum": (lambda x: x.sum(1), lambda x: x.sum(1), normal),
    "sum-all": (lambda x: x.sum(), lambda x: x.sum(), normal),
    "sum-keepdim": (lambda x: x.sum(0, keepdim=True), lambda x: x.sum(0, keepdims=True), normal),
    "max": (lambda x: x.max(1), lambda x: x.max(1), distinct),
    "max-all": (lambda x: x.max(), lambda x: x.max(), distinct),
    "min": (lambda x: x.min(0), lambda x: x.min(0), distinct),
    "prod": (lambda x: x.prod(1), lambda x: x.prod(1), away_from_zero),
    "mean": (lambda x: x.mean(), lambda x: x.mean(), normal),
    "var": (lambda x: x.var(1), lambda x: x.var(1, ddof=1), normal),
    "std": (lambda x: x.std(0), lambda x: x.std(0, ddof=1), normal),
    "softmax": (lambda x: x.softmax(), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True), normal),
    "log_softmax": (lambda x: x.log_softmax(), lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)), normal),
    "layernorm": (lambda x: x.layernorm(),
                  lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), normal),
    "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1), normal),
}


@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce(name):
    f_t, f_np, data = REDUCE[name]
    check(f_t, f_np, data(3, 4))


def test_prod_with_zeros():
    """The product's gradient where factors are zero: the product of the others for a lone zero, else 0."""
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, -1.0]])
    t = Tensor(x)
    (g,) = t.prod(1).sum().gradient(t)
    want = np.array([[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-2.0, -1.5, 3.0]])
    np.testing.assert_allclose(g.numpy(), want)
    check(lambda a: a.prod(1), lambda a: a.prod(1), x)  # smooth in every input, zeros included


MOVEMENT = {
    "reshape": (lambda x: x.reshape(2, 6) * Tensor(np.arange(12.0).reshape(2, 6)),
                lambda x: x.reshape(2, 6) * np.arange(12.0).reshape(2, 6)),
    "permute": (lambda x: x.permute(1, 0) * Tensor(np.arange(12.0).reshape(4, 3)),
                lambda x: x.T * np.arange(12.0).reshape(4, 3)),
    "pad": (lambda x: x.pad(((1, 2), (0, 1))).exp(), lambda x: np.exp(np.pad(x, ((1, 2), (0, 1))))),
    "pad-value": (lambda x: x.pad(((1, 0), (2, 1)), value=1.5) ** 2, lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=1.5) ** 2),
    "pad-reflect": (lambda x: x.pad(((1, 1), (2, 0)), mode="reflect").sin(), lambda x: np.sin(np.pad(x, ((1, 1), (2, 0)), mode="reflect"))),
    "shrink": (lambda x: x.shrink(((1, 3), (0, 2))).exp(), lambda x: np.exp(x[1:3, 0:2])),
    "getitem": (lambda x: x[1:, 2].exp(), lambda x: np.exp(x[1:, 2])),
    "flip": (lambda x: x.flip(1) * Tensor(np.arange(12.0).reshape(3, 4)), lambda x: x[:, ::-1] * np.arange(12.0).reshape(3, 4)),
    "expand": (lambda x: x[:, :1].expand(3, 5).sin(), lambda x: np.sin(np.broadcast_to(x[:, :1], (3, 5)))),
    "cat": (lambda x: x.cat(x * 2, dim=1).exp(), lambda x: np.exp(np.concatenate([x, x * 2], 1))),
    "stack": (lambda x: x.stack(x.sin(), dim=0), lambda x: np.stack([x, np.sin(x)])),
    "transpose-matmul": (lambda x: x.T @ x, lambda x: x.T @ x),
}


@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(name):
    f_t, f_np = MOVEMENT[name]
    check(f_t, f_np, normal(3, 4))


def test_matmul_and_conv2d():
    check(lambda a, b: (a @ b).relu(), lambda a, b: np.maximum(a @ b, 0), normal(2, 3), normal(3, 4) + 0.01)
    check(lambda a, b: a.conv2d(b, padding=1), _conv2d_np, normal(1, 2, 4, 4), normal(3, 2, 3, 3))


def _conv2d_np(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + x.shape[2], j:j + x.shape[3]], w[:, :, i, j])
    return out


def test_assign_passes_the_gradient_to_its_value():
    x = Tensor(normal(3))
    buf = Tensor.zeros(3, dtype=dtypes.float64).contiguous().realize()
    buf.assign(x * 2)
    (gx,) = (buf * buf).sum().gradient(x)
    np.testing.assert_allclose(gx.numpy(), 8 * x.numpy())


def test_detach_stops_the_gradient():
    v = normal(4)
    x = Tensor(v)
    (g,) = (x.detach() * x).sum().gradient(x)
    np.testing.assert_allclose(g.numpy(), v)
    (g,) = x.detach().sin().sum().gradient(x)
    assert g.numpy().tolist() == [0.0] * 4


# ------------------------------------------------------------------ conventions (tinygrad 0.14's)

def _grad(f, values):
    x = Tensor(np.array(values, np.float64))
    f(x).backward()
    return x.grad.numpy().tolist()


def test_ties_follow_tinygrad():
    # a reduction's maximum shared by k elements sends 1/k to each
    assert _grad(lambda x: x.max(), [0.0, 2.0, -1.0, 2.0]) == [0.0, 0.5, 0.0, 0.5]
    assert _grad(lambda x: x.max(1).sum(), [[1.0, 3.0, 3.0, 3.0], [5.0, 4.0, 1.0, 0.0]]) == \
        [[0.0, 1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0, 0.0]]
    assert _grad(lambda x: x.min(), [1.0, -1.0, -1.0]) == [0.0, 0.5, 0.5]
    # an elementwise maximum with equal sides sends half to each side
    y = Tensor(np.array([0.0, 2.0, -1.0, 1.0]))
    assert _grad(lambda x: x.maximum(y).sum(), [0.0, 1.0, -1.0, 2.0]) == [0.5, 0.0, 0.5, 1.0]
    assert _grad(lambda x: x.maximum(x).sum(), [1.0, -2.0]) == [1.0, 1.0]


def test_where_at_the_boundary_follows_the_condition():
    # (x > 0) is false at 0: the gradient there is the else branch's
    assert _grad(lambda x: (x > 0).where(x, -x).sum(), [0.0, 1.0, -1.0]) == [-1.0, 1.0, -1.0]
    assert _grad(lambda x: (x >= 0).where(x * 3, 0.0).sum(), [0.0, -1.0]) == [3.0, 0.0]


def test_kinks_of_sqrt_and_prod():
    g = _grad(lambda x: x.sqrt().sum(), [0.0, 4.0])
    assert g[0] == float("inf") and g[1] == 0.25
    assert _grad(lambda x: x.prod(), [0.0, 1.0, 2.0, 0.0]) == [0.0, 0.0, 0.0, 0.0]


# ------------------------------------------------------------------ the API

def test_backward_fills_grad_of_float_tensors_with_a_device():
    a = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    b = Tensor(np.array([4.0, 5.0, 6.0], np.float32))
    n = Tensor([1, 2, 3])
    r = Tensor.arange(3).float()  # no device: no gradient, as tinygrad 0.14
    h = a * b  # an intermediate tensor gets one too
    loss = (h * n + r).sum()
    assert loss.backward() is loss
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 10.0, 18.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 4.0, 9.0])
    np.testing.assert_allclose(h.grad.numpy(), [1.0, 2.0, 3.0])
    assert a.grad.dtype == dtypes.float32 and n.grad is None and r.grad is None


def test_backward_accumulates():
    a = Tensor(np.array([1.0, 2.0], np.float32))
    (a * a).sum().backward()
    (a * 3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [5.0, 7.0])
    a.grad = None
    (a * 3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 3.0])


def test_backward_with_a_gradient_and_errors():
    a = Tensor(np.array([1.0, 2.0], np.float32))
    with pytest.raises(GradientError, match=r"needs a scalar, but the shape is \(2,\)"):
        (a * 2).backward()
    (a * 2).backward(Tensor(np.array([1.0, -1.0], np.float32)))
    np.testing.assert_allclose(a.grad.numpy(), [2.0, -2.0])
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\) for a tensor of shape \(2,\)"):
        (a * 2).backward(Tensor([1.0, 2.0, 3.0]))
    with pytest.raises(GradientError, match="only float tensors"):
        Tensor([1, 2]).sum().backward()
    with pytest.raises(GradientError, match="only float tensors"):
        a.sum().gradient(Tensor([1, 2]))
    with pytest.raises(TypeError, match="target 1 is list"):
        a.sum().gradient([1.0])


def test_gradient_stores_nothing_and_gives_zeros_for_unrelated_targets():
    a, b = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
    ga, gb = (a * a).sum().gradient(a, b)
    assert a.grad is None and b.grad is None
    assert ga.numpy().tolist() == [2.0, 4.0] and gb.numpy().tolist() == [0.0, 0.0]


def test_requires_grad():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 4.0], requires_grad=False)
    c = Tensor([5.0, 6.0])
    assert (a.requires_grad, b.requires_grad, c.requires_grad) == (True, False, None)
    (a * b * c).sum().backward()
    assert b.grad is None
    assert a.grad.numpy().tolist() == [15.0, 24.0] and c.grad.numpy().tolist() == [3.0, 8.0]
    assert b.requires_grad_() is b and b.requires_grad is True
    with pytest.raises(TypeError, match="requires_grad must be"):
        Tensor([1.0], requires_grad=1)


def test_gradient_of_a_realized_loss_is_zero_as_in_tinygrad():
    # realizing replaces the graph by its buffer: nothing depends on `a` any more
    a = Tensor([1.0, 2.0])
    loss = (a * a).sum().realize()
    (g,) = loss.gradient(a)
    assert g.numpy().tolist() == [0.0, 0.0]


def test_missing_rule_is_a_clear_error():
    x = Tensor([1.0, 2.0]).uop
    odd = x.replace(op=Ops.MULACC, src=(x, x, x), arg=None)
    with pytest.raises(GradientError, match="no gradient rule for MULACC"):
        compute_gradients(odd, odd, [x])


# ------------------------------------------------------------------ compositions (hypothesis)

OPS1 = [
    (lambda x: x.sin(), np.sin), (lambda x: -x, np.negative), (lambda x: x.tanh(), np.tanh),
    (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x))), (lambda x: (x * x + 1).sqrt(), lambda x: np.sqrt(x * x + 1)),
    (lambda x: (x * x + 1).log(), lambda x: np.log(x * x + 1)), (lambda x: x.tanh().exp(), lambda x: np.exp(np.tanh(x))),
    (lambda x: x.flip(1), lambda x: x[:, ::-1]), (lambda x: x.T.reshape(2, 3), lambda x: x.T.reshape(2, 3)),
    (lambda x: x.pad(((1, 0), (0, 2))).shrink(((0, 2), (1, 4))), lambda x: np.pad(x, ((1, 0), (0, 2)))[0:2, 1:4]),
    (lambda x: x.sum(1, keepdim=True).expand(2, 3), lambda x: np.broadcast_to(x.sum(1, keepdims=True), (2, 3))),
    (lambda x: x.max(0, keepdim=True) * x, lambda x: x.max(0, keepdims=True) * x),
    (lambda x: x.softmax(1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (lambda x: x.contiguous(), lambda x: x),
]
OPS2 = [
    (lambda a, b: a + b, np.add), (lambda a, b: a - b, np.subtract), (lambda a, b: a * b, np.multiply),
    (lambda a, b: a / (b * b + 1), lambda a, b: a / (b * b + 1)), (lambda a, b: a.maximum(b), np.maximum),
    (lambda a, b: (a > b).where(a, b * 2), lambda a, b: np.where(a > b, a, b * 2)),
]


@st.composite
def programs(draw):
    """A straight-line program over 2 inputs of shape (2, 3): each step applies a unary or binary op to
    earlier values; the result is the last value."""
    steps = []
    for k in range(draw(st.integers(1, 6))):
        n = 2 + k
        if draw(st.booleans()):
            steps.append((1, draw(st.integers(0, len(OPS1) - 1)), draw(st.integers(0, n - 1)), 0))
        else:
            steps.append((2, draw(st.integers(0, len(OPS2) - 1)), draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
    return steps, draw(st.integers(0, 2**31))


def run_program(steps, values, tensor: bool):
    for arity, i, a, b in steps:
        f = (OPS1 if arity == 1 else OPS2)[i][0 if tensor else 1]
        values = values + [f(values[a]) if arity == 1 else f(values[a], values[b])]
    return values[-1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_compositions_match_finite_differences(prog):
    steps, seed = prog
    data = np.random.default_rng(seed)
    xs = [data.standard_normal((2, 3)) for _ in range(2)]
    check(lambda *ts: run_program(steps, list(ts), True), lambda *arrs: run_program(steps, list(arrs), False),
          *xs, rtol=1e-4, atol=1e-5, seed=seed)


def test_copy_sends_the_gradient_back_to_the_source_device():
    x = Tensor(np.array([1.0, 2.0, 3.0]))
    y = x.to("PYTHON")
    (y * y).sum().backward()
    assert x.grad.device == x.device and y.grad.device == "PYTHON"
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_half_expand_sums_in_float32():
    # 3000 ones sum to 3000 in float32 and back; accumulated in float16 they would stop at 2048
    h = Tensor(np.array([1.0, 2.0], np.float16))
    (h.reshape(2, 1).expand(2, 3000)).sum().backward()
    assert h.grad.dtype == dtypes.float16 and h.grad.numpy().tolist() == [3000.0, 3000.0]


def test_relu_gradient_at_zero_is_zero_as_tinygrad():
    x = Tensor(np.array([-1.0, 0.0, 2.0]))
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])
