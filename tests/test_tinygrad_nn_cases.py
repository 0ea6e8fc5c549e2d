"""What tinygrad 0.14's nn, optimizer and jit tests ask of rulec's tinygrad layer: TinyJit's contract (which
calls raise JitError), the 1-d convolutions, InstanceNorm, LayerNorm2d, LSTMCell and `Tensor.batchnorm`,
the LARS / LAMB family of optimizers with `lr` as a Tensor, and load_state_dict's shape rules. Every value
is checked against numpy computed here."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, nn
from rulec.helpers import Context
from rulec.jit import JitError, TinyJit
from rulec.nn.optim import LAMB, LARS, SGD, AdamW, Muon, OptimizerGroup
from rulec.nn.state import load_state_dict

rng = np.random.default_rng(2026)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- TinyJit


def _adder() -> TinyJit:
    @TinyJit
    def add(a, b):
        return (a + b).realize()
    return add


def test_jit_refuses_other_shapes_dtypes_and_calling_conventions_after_the_capture_only():
    add = _adder()
    a, b = f32(3, 3), f32(3, 3)
    np.testing.assert_allclose(add(Tensor(a), Tensor(b)).numpy(), a + b, rtol=1e-6)
    # the second call (tinygrad's capture) may still differ from the first
    np.testing.assert_allclose(add(Tensor(a[:2]), Tensor(b[:2])).numpy(), a[:2] + b[:2], rtol=1e-6)
    np.testing.assert_allclose(add(Tensor(a[:2] * 2), Tensor(b[:2])).numpy(), a[:2] * 2 + b[:2], rtol=1e-6)
    with pytest.raises(JitError, match="args mismatch"):
        add(Tensor(a), Tensor(b))
    with pytest.raises(JitError, match="args mismatch"):
        add(Tensor(a[:2]), Tensor(b[:1]))  # broadcastable, but not the captured shape
    with pytest.raises(JitError, match="args mismatch"):
        add(Tensor(a[:2]), Tensor(np.ones((2, 3), np.int32)))
    with pytest.raises(JitError, match="args mismatch"):
        add(a=Tensor(a[:2]), b=Tensor(b[:2]))
    add.reset()
    np.testing.assert_allclose(add(Tensor(a), Tensor(b)).numpy(), a + b, rtol=1e-6)
    with Context(JIT=0):
        for n in (1, 2, 3):
            np.testing.assert_allclose(add(Tensor(a[:n]), Tensor(b[:n])).numpy(), a[:n] + b[:n], rtol=1e-6)


def test_jit_refuses_a_view_of_its_buffer_at_another_offset_but_not_the_same_view():
    @TinyJit
    def inc(x):
        return (x + 1).realize()

    base_np = f32(6, 6)
    base = Tensor(base_np).realize()
    for _ in range(3):
        np.testing.assert_allclose(inc(base[:, 1:3]).numpy(), base_np[:, 1:3] + 1, rtol=1e-6)
    with pytest.raises(JitError):
        inc(base[:, 2:4])


def test_jit_refuses_duplicate_and_constant_inputs_on_every_call():
    add = _adder()
    x = Tensor(f32(4))
    with pytest.raises(JitError, match="duplicate"):
        add(x, x)
    with pytest.raises(JitError, match="real buffers"):
        add(x, Tensor(2.0))
    with pytest.raises(JitError, match="real buffers"):
        add(x, Tensor.arange(4).float())


def test_jit_capture_call_refuses_reads_non_tensor_results_and_doing_nothing():
    @TinyJit
    def reads(x):
        return Tensor.zeros(int(x.sum().item()))

    x = Tensor([1.0, 2.0])
    assert reads(x).shape == (3,)  # the first call runs plainly
    with pytest.raises(JitError, match="reading the values"):
        reads(x)

    @TinyJit
    def pair(x, k):
        return (x * 2).realize(), k

    assert pair(Tensor([1.0]), 3)[1] == 3
    with pytest.raises(JitError, match="only tensors"):
        pair(Tensor([1.0]), 3)

    @TinyJit
    def nothing(x):
        return None

    nothing(Tensor([1.0]))
    with pytest.raises(JitError, match="no kernel"):
        nothing(Tensor([1.0]))


def test_jit_random_values_count_as_work_and_differ_each_call():
    @TinyJit
    def noise():
        return Tensor.rand(4)

    draws = [noise().numpy() for _ in range(4)]
    assert all((d >= 0).all() and (d < 1).all() for d in draws)
    assert len({d.tobytes() for d in draws}) == 4


def test_a_jit_captured_inside_another_capture_is_a_runtime_error():
    @TinyJit
    def inner(t):
        return t + 1

    @TinyJit
    def outer(t):
        return inner(t) * 3

    assert outer(Tensor([1.0])).item() == 6.0
    with pytest.raises(RuntimeError, match="inside another TinyJit"):
        outer(Tensor([1.0]))


def test_jit_with_options_returns_a_decorator_and_realizes_every_output():
    @TinyJit(prune=True)
    def parts(a, b):
        return {"sum": a + b, "both": [a - b, a * b]}

    for _ in range(4):
        a, b = f32(5), f32(5)
        out = parts(Tensor(a), Tensor(b))
        np.testing.assert_allclose(out["sum"].numpy(), a + b, rtol=1e-6)
        np.testing.assert_allclose(out["both"][0].numpy(), a - b, rtol=1e-6)
        np.testing.assert_allclose(out["both"][1].numpy(), a * b, rtol=1e-6)
    assert parts.cnt == 4


def test_tinygrad_layer_serves_jit_error():
    from rulec.compat import tinygrad_layer

    with tinygrad_layer():
        from tinygrad.engine.jit import JitError as served
    assert served is JitError


# ---------------------------------------------------------------- layers


def _conv1d_ref(x, w, b, stride, pad, dil):
    """Cross-correlation over the last axis: x (n, c, l), w (o, c, k); pad = (left, right)."""
    x = np.pad(x, ((0, 0), (0, 0), pad))
    k = w.shape[2]
    out_len = (x.shape[2] - dil * (k - 1) - 1) // stride + 1
    cols = np.stack([x[:, :, i * stride: i * stride + dil * (k - 1) + 1: dil] for i in range(out_len)], axis=2)
    return np.einsum("nclk,ock->nol", cols, w) + b[None, :, None]


@pytest.mark.parametrize("stride,padding,dilation", [(2, 1, 1), (1, "same", 2), (1, "same", 1)])
def test_conv1d_is_a_cross_correlation_over_the_last_axis(stride, padding, dilation):
    layer = nn.Conv1d(3, 4, 4, stride=stride, padding=padding, dilation=dilation)
    assert layer.weight.shape == (4, 3, 4)
    x = f32(2, 3, 11)
    if padding == "same":
        total = dilation * 3
        pad = (total // 2, total - total // 2)
    else:
        pad = (padding, padding)
    ref = _conv1d_ref(x, layer.weight.numpy(), layer.bias.numpy(), stride, pad, dilation)
    out = layer(Tensor(x)).numpy()
    if padding == "same":
        assert out.shape == x.shape[:1] + (4,) + x.shape[2:]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_conv_transpose1d_spreads_each_input_over_the_kernel():
    layer = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1)
    x, w, b = f32(2, 2, 5), layer.weight.numpy(), layer.bias.numpy()
    full = np.zeros((2, 3, (5 - 1) * 2 + 3 + 1))  # the output before padding is cut
    for i in range(5):
        full[:, :, 2 * i: 2 * i + 3] += np.einsum("nc,cok->nok", x[:, :, i], w)
    ref = full[:, :, 1: full.shape[2] - 1] + b[None, :, None]
    np.testing.assert_allclose(layer(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)


def _standardize(x, axes, eps=1e-5):
    m = x.mean(axes, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axes, keepdims=True) + eps)


def test_instance_norm_and_layer_norm_2d():
    inorm = nn.InstanceNorm(3)
    inorm.weight, inorm.bias = Tensor(f32(3)), Tensor(f32(3))
    x = f32(2, 3, 4, 5)
    ref = _standardize(x, (2, 3)) * inorm.weight.numpy()[:, None, None] + inorm.bias.numpy()[:, None, None]
    np.testing.assert_allclose(inorm(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
    lnorm = nn.LayerNorm2d(3)
    lnorm.weight, lnorm.bias = Tensor(f32(3)), Tensor(f32(3))
    ref = _standardize(x, (1,)) * lnorm.weight.numpy()[:, None, None] + lnorm.bias.numpy()[:, None, None]
    np.testing.assert_allclose(lnorm(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
    assert nn.BatchNorm3d is nn.BatchNorm


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_lstm_cell_two_steps():
    cell = nn.LSTMCell(5, 3)
    cell.bias_ih, cell.bias_hh = Tensor(f32(12)), Tensor(f32(12))
    wi, wh, bi, bh = (t.numpy() for t in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh))
    x = f32(2, 5)
    h, c = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)
    th, tc = None, None
    for _ in range(2):
        gates = x @ wi.T + bi + h @ wh.T + bh
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        th, tc = cell(Tensor(x), None if th is None else (th, tc))
        np.testing.assert_allclose(th.numpy(), h, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(tc.numpy(), c, rtol=1e-4, atol=1e-5)
    assert nn.LSTMCell(5, 3, bias=False).bias_ih is None


def test_batchnorm_over_several_axes():
    x, w, b, mean, invstd = f32(2, 4, 3, 2), f32(2, 3), f32(2, 3), f32(2, 3), f32(2, 3)
    out = Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(mean), Tensor(invstd), axis=(0, 2))
    sh = (2, 1, 3, 1)
    ref = (x - mean.reshape(sh)) * (w * invstd).reshape(sh) + b.reshape(sh)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- optimizers

_P0, _W = f32(3, 4), f32(3, 4)


def _train(make, steps=4):
    """A few steps of `make([p])` on loss = sum(sin(p) * W); returns p and each step's gradient."""
    p = Tensor(_P0.copy())
    opt = make([p])
    for _ in range(steps):
        opt.zero_grad()
        (p.sin() * Tensor(_W)).sum().backward()
        opt.step()
    return p.numpy()


def _numpy_train(update, steps=4):
    p, state = _P0.astype(np.float64), {}
    for _ in range(steps):
        p = p - update(p, np.cos(p) * _W, state)
    return p


def _ns(g, steps, coefs, eps=1e-7):
    if g.shape[0] > g.shape[1]:
        return _ns(g.T, steps, coefs, eps).T
    x = g / (np.sqrt((g * g).sum()) + eps)
    for _ in range(steps):
        gram, term, total = x @ x.T, x, 0
        for c in coefs:
            total, term = total + c * term, gram @ term
        x = total
    return x


def test_sgd_muon_and_lars_match_numpy_over_several_steps():
    def sgd(p, g, s):
        g = g + 0.1 * p
        s["b"] = 0.9 * s.get("b", 0) + g
        return 0.05 * (g + 0.9 * s["b"])

    np.testing.assert_allclose(_train(lambda ps: SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.1, nesterov=True)),
                               _numpy_train(sgd), rtol=1e-4, atol=1e-5)

    def muon(p, g, s):
        s["b"] = 0.95 * s.get("b", 0) + g
        return 0.01 * _ns(g + 0.95 * s["b"], 5, (3.4445, -4.775, 2.0315)) + 0.1 * 0.01 * p

    np.testing.assert_allclose(_train(lambda ps: Muon(ps, lr=0.01)), _numpy_train(muon), rtol=1e-3, atol=1e-4)

    def lars(p, g, s):
        pn, gn = np.sqrt((p * p).sum()), np.sqrt((g * g).sum())
        trust = 0.001 * pn / (gn + 1e-4 * pn)
        s["b"] = 0.9 * s.get("b", 0) + (g + 1e-4 * p) * trust * 0.5
        return s["b"]

    np.testing.assert_allclose(_train(lambda ps: LARS(ps, lr=0.5)), _numpy_train(lars), rtol=1e-4, atol=1e-6)


def test_lamb_scales_the_adam_step_by_the_trust_ratio():
    def lamb(p, g, s):
        t = s["t"] = s.get("t", 0) + 1
        s["m"] = 0.9 * s.get("m", 0) + 0.1 * g
        s["v"] = 0.999 * s.get("v", 0) + 0.001 * g * g
        up = (s["m"] / (1 - 0.9 ** t)) / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-6) + 0.01 * p
        return 0.02 * np.sqrt((p * p).sum()) / np.sqrt((up * up).sum()) * up

    np.testing.assert_allclose(_train(lambda ps: LAMB(ps, lr=0.02, weight_decay=0.01)), _numpy_train(lamb),
                               rtol=1e-4, atol=1e-5)


def test_lr_is_a_tensor_a_schedule_can_assign_and_a_group_steps_all():
    a, b = Tensor(_P0.copy()), Tensor(_W.copy())
    group = OptimizerGroup(SGD([a], lr=0.1), AdamW([b], lr=0.01))
    assert isinstance(group[0].lr, Tensor) and group[0].lr.shape == (1,)
    ra, rb, st = _P0.astype(np.float64), _W.astype(np.float64), {}
    for step in range(3):
        group.zero_grad()
        (a * b).sum().backward()
        group.step()
        ga, gb = rb, ra
        ra = ra - (0.1 / 2 ** step) * ga
        t = step + 1
        st["m"] = 0.9 * st.get("m", 0) + 0.1 * gb
        st["v"] = 0.999 * st.get("v", 0) + 0.001 * gb * gb
        rb = rb - 0.01 * ((st["m"] / (1 - 0.9 ** t)) / (np.sqrt(st["v"] / (1 - 0.999 ** t)) + 1e-8) + 0.01 * rb)
        group[0].lr.assign(group[0].lr / 2).realize()
    np.testing.assert_allclose(a.numpy(), ra, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), rb, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="learning rate"):
        SGD([Tensor(_P0)], lr=-1)


# ---------------------------------------------------------------- state


def test_load_state_dict_takes_a_one_element_value_for_a_scalar_and_names_a_mismatch():
    bn = nn.BatchNorm(2)
    load_state_dict(bn, {"weight": Tensor([2.0, 3.0]), "bias": Tensor([0.5, 1.0]), "running_mean": Tensor.zeros(2),
                         "running_var": Tensor.ones(2), "num_batches_tracked": Tensor([7])}, verbose=False)
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 7
    with pytest.raises(ValueError, match=r"Shape mismatch in layer `weight`: Expected shape \(2,\), but found \(3,\)"):
        load_state_dict(nn.BatchNorm(2), {"weight": Tensor.ones(3)}, strict=False)


def test_load_state_dict_realize_false_leaves_the_value_lazy():
    layer = nn.Linear(3, 2, bias=False)
    raw = Tensor.full((2, 3), 4, dtype="uint8").contiguous().realize()
    assert raw.uop.is_realized
    load_state_dict(layer, {"weight": raw.float() * 0.25}, realize=False)
    assert not layer.weight.uop.is_realized
    np.testing.assert_array_equal(layer.weight.numpy(), np.ones((2, 3), np.float32))
    load_state_dict(layer, {"weight": raw.float() * 0.5})
    assert layer.weight.uop.is_realized and layer.weight[:, 1:].uop.is_realized


# ---------------------------------------------------------------- autograd after realize


def test_a_loss_read_before_backward_still_has_gradients():
    w_np = f32(3, 2)
    w = Tensor(w_np.copy())
    w.requires_grad = True
    loss = (w * w).sum()
    assert abs(loss.item() - float((w_np.astype(np.float64) ** 2).sum())) < 1e-4
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w_np, rtol=1e-6)
    other = (w.exp()).mean()
    other.numpy()
    np.testing.assert_allclose(other.gradient(w)[0].numpy(), np.exp(w_np) / w_np.size, rtol=1e-5)
    cut = (w * 2).sum().realize()  # an explicit realize() is where the graph ends, as in tinygrad
    np.testing.assert_array_equal(cut.gradient(w)[0].numpy(), np.zeros_like(w_np))
    opt = SGD([w], lr=0.1)
    opt.zero_grad()
    step_loss = (w * 3).sum()
    print(step_loss.numpy())  # a training loop printing its loss first
    step_loss.backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), w_np - 0.3, rtol=1e-6)
