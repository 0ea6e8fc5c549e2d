"""rulec.nn layers, rulec.nn.state and rulec.helpers.Context (issue 11 §2), against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor, nn
from rulec.helpers import Context, getenv
from rulec.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(t, want, tol=1e-4):
    np.testing.assert_allclose(t.numpy(), want, rtol=tol, atol=tol)


def conv2d_ref(x, w, stride=1, padding=0, dilation=1, groups=1):
    n, cin, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (xp.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    ow = (xp.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, cout, oh, ow))
    for g in range(groups):
        for co in range(g * cout // groups, (g + 1) * cout // groups):
            for i in range(kh):
                for j in range(kw):
                    patch = xp[:, g * cin_g:(g + 1) * cin_g, i * dilation:i * dilation + stride * oh:stride,
                               j * dilation:j * dilation + stride * ow:stride]
                    out[:, co] += np.einsum("nchw,c->nhw", patch, w[co, :, i, j])
    return out


def conv_transpose2d_ref(x, w, stride, padding, output_padding, dilation, groups):
    """The definition: every input element scatters weight * value to stride*i - padding + dilation*k."""
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    oh = (h - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1
    ow = (wd - 1) * stride - 2 * padding + dilation * (kw - 1) + output_padding + 1
    out = np.zeros((n, cout_g * groups, oh + 2 * padding + stride, ow + 2 * padding + stride))
    cin_g = cin // groups
    for ci in range(cin):
        g = ci // cin_g
        for i in range(kh):
            for j in range(kw):
                for co in range(cout_g):
                    out[:, g * cout_g + co, i * dilation:i * dilation + stride * h:stride,
                        j * dilation:j * dilation + stride * wd:stride] += x[:, ci] * w[ci, co, i, j]
    return out[:, :, padding:padding + oh, padding:padding + ow]


def test_linear_and_conv2d():
    lin = nn.Linear(5, 3)
    x = arr(4, 5)
    close(lin(Tensor(x)), x @ lin.weight.numpy().T + lin.bias.numpy())
    assert nn.Linear(5, 3, bias=False).bias is None
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    xi = arr(2, 4, 7, 7)
    close(conv(Tensor(xi)), conv2d_ref(xi, conv.weight.numpy(), 2, 1, 1, 2) + conv.bias.numpy().reshape(1, -1, 1, 1))


@pytest.mark.parametrize("kernel,dilation", [(3, 1), ((3, 2), 1), ((2, 4), 2), (1, 3)])
def test_conv2d_same_padding_keeps_the_size(kernel, dilation):
    conv = nn.Conv2d(4, 6, kernel, padding="same", dilation=dilation, groups=2)
    x = arr(2, 4, 7, 6)
    kh, kw = conv.kernel_size
    th, tw = dilation * (kh - 1), dilation * (kw - 1)  # an odd total pads one more at the bottom/right
    xp = np.pad(x, ((0, 0), (0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2)))
    want = conv2d_ref(xp, conv.weight.numpy(), 1, 0, dilation, 2) + conv.bias.numpy().reshape(1, -1, 1, 1)
    assert want.shape == (2, 6, 7, 6)
    close(conv(Tensor(x)), want)


def test_conv2d_same_padding_errors():
    with pytest.raises(ValueError, match="stride 1, got stride=2"):
        nn.Conv2d(4, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="'valid'"):
        nn.Conv2d(4, 6, 3, padding="valid")


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups",
                         [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 0, 1, 2), (2, 0, 1, 2, 1)])
def test_conv_transpose2d(stride, padding, output_padding, dilation, groups):
    layer = nn.ConvTranspose2d(4, 6, 3, stride=stride, padding=padding, output_padding=output_padding,
                               dilation=dilation, groups=groups)
    x = arr(2, 4, 5, 4)
    want = conv_transpose2d_ref(x, layer.weight.numpy(), stride, padding, output_padding, dilation, groups)
    close(layer(Tensor(x)), want + layer.bias.numpy().reshape(1, -1, 1, 1))


def test_batchnorm_in_training_and_in_evaluation():
    bn = nn.BatchNorm2d(3)
    bn.weight, bn.bias = Tensor(arr(3)), Tensor(arr(3))
    x = arr(4, 3, 5, 5)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    shape = (1, 3, 1, 1)
    with Context(TRAINING=1):
        y = bn(Tensor(x))
        close(y, (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * bn.weight.numpy().reshape(shape)
              + bn.bias.numpy().reshape(shape))
    n = x.size / 3
    close(bn.running_mean, 0.1 * mean)
    close(bn.running_var, 0.9 + 0.1 * var * n / (n - 1))
    assert bn.num_batches_tracked.numpy().tolist() == 1
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    close(bn(Tensor(x)), (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + 1e-5) * bn.weight.numpy().reshape(shape)
          + bn.bias.numpy().reshape(shape))


def test_half_precision_statistics_do_not_overflow():
    # deviations of a few hundred: their squares pass float16's 65504, the variances do not; float16
    # arithmetic (numpy's too) made var inf and LayerNorm 0, tinygrad and torch square in float32
    x16 = (arr(2, 3, 4, 6) * 100).astype(np.float16)
    x = x16.astype(np.float64)
    np.testing.assert_allclose(Tensor(x16).var(-1).numpy(), x.var(-1, ddof=1), rtol=2e-3)
    np.testing.assert_allclose(Tensor(x16).std((0, 2)).numpy(), x.std((0, 2), ddof=1), rtol=2e-3)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(nn.LayerNorm(6)(Tensor(x16)), (x - mu) / np.sqrt(var + 1e-5), tol=5e-3)
    grouped = x.reshape(2, 3, -1)
    gmu, gvar = grouped.mean(-1, keepdims=True), grouped.var(-1, keepdims=True)
    close(nn.GroupNorm(3, 3)(Tensor(x16)), ((grouped - gmu) / np.sqrt(gvar + 1e-5)).reshape(x.shape), tol=5e-3)
    rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    close(nn.RMSNorm(6)(Tensor(x16)), rms, tol=5e-3)
    bmu, bvar = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    with Context(TRAINING=1):
        close(nn.BatchNorm2d(3)(Tensor(x16)), (x - bmu) / np.sqrt(bvar + 1e-5), tol=5e-3)


def test_norms_and_embedding():
    x = arr(2, 4, 6)
    ln = nn.LayerNorm(6)
    ln.weight, ln.bias = Tensor(arr(6)), Tensor(arr(6))
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(ln(Tensor(x)), (x - mu) / np.sqrt(var + 1e-5) * ln.weight.numpy() + ln.bias.numpy())
    with pytest.raises(ValueError, match="LayerNorm"):
        ln(Tensor(arr(2, 5)))
    gn = nn.GroupNorm(2, 4)
    xg = arr(3, 4, 5)
    grouped = xg.reshape(3, 2, -1)
    ref = ((grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + 1e-5)).reshape(xg.shape)
    close(gn(Tensor(xg)), ref)
    rms = nn.RMSNorm(6)
    close(rms(Tensor(x)), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6))
    emb = nn.Embedding(10, 3)
    idx = np.array([[1, 9, 0], [4, 4, 2]], dtype=np.int32)
    close(emb(Tensor(idx)), emb.weight.numpy()[idx])


class _Model:
    def __init__(self):
        self.conv = nn.Conv2d(1, 2, 3)
        self.layers = [nn.Linear(4, 3), nn.Linear(3, 2)]
        self.norm = {"ln": nn.LayerNorm(2)}


def test_state_dict_names_load_and_safetensors(tmp_path):
    m = _Model()
    sd = get_state_dict(m)
    assert list(sd) == ["conv.weight", "conv.bias", "layers.0.weight", "layers.0.bias", "layers.1.weight",
                        "layers.1.bias", "norm.ln.weight", "norm.ln.bias"]
    assert len(get_parameters(m)) == 8
    path = tmp_path / "m.safetensors"
    safe_save(sd, path, metadata={"model": "test"})
    loaded = safe_load(path)
    assert set(loaded) == set(sd)
    other = _Model()
    load_state_dict(other, loaded)
    for name, t in get_state_dict(other).items():
        np.testing.assert_array_equal(t.numpy(), sd[name].numpy())
    with pytest.raises(KeyError, match="has no conv.weight"):
        load_state_dict(_Model(), {})
    bad = dict(loaded)
    bad["conv.bias"] = Tensor(arr(3))
    with pytest.raises(ValueError, match=r"layer `conv.bias`: Expected shape \(2,\), but found \(3,\)"):
        load_state_dict(_Model(), bad)


def test_safetensors_keep_a_0d_tensor_0d(tmp_path):
    # a BatchNorm's num_batches_tracked is 0-d: it must load back into the model it was saved from
    bn = nn.BatchNorm(3)
    path = tmp_path / "bn.safetensors"
    safe_save(get_state_dict(bn), path)
    loaded = safe_load(path)
    assert loaded["num_batches_tracked"].shape == () and loaded["running_mean"].shape == (3,)
    load_state_dict(nn.BatchNorm(3), loaded)


def test_context_sets_training_and_settings():
    assert not Tensor.training
    with Context(TRAINING=1, BEAM=2):
        assert Tensor.training and getenv("BEAM") == 2 and getenv("TRAINING") == 1
        with Context(TRAINING=0):
            assert not Tensor.training
        assert Tensor.training
    assert not Tensor.training and getenv("BEAM", 0) == 0
