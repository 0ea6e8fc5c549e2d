"""Neural-network layers, as tinygrad 0.14's `nn` (`from rulec import nn`, or `rulec.nn`): callable objects
holding their parameters as Tensors, built from Tensor ops only.

Initial values are drawn with `Tensor.rand` (numpy's generator on the host), so they follow the same
distributions as tinygrad's but are not the same numbers.
"""
from __future__ import annotations

import math
from typing import Sequence

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.tensor.tensor import Tensor

__all__ = ["Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm2d", "BatchNorm3d",
           "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm", "Embedding", "RMSNorm", "LSTMCell", "conv_transpose2d"]


def uniform(shape: Sequence[int], low: float, high: float) -> Tensor:
    return Tensor.uniform(*shape, low=low, high=high).realize()


def _per_axis(v: int | Sequence[int], nd: int) -> tuple[int, ...]:
    return (int(v),) * nd if isinstance(v, int) else tuple(int(i) for i in v)


def _kernel_sizes(kernel_size: int | Sequence[int]) -> tuple[int, ...]:
    """A Conv2d kernel: an int is square; a sequence names every spatial axis (three for a volume, as
    tinygrad's Conv2d takes), none dropped."""
    return _per_axis(kernel_size, 2)


def _acc(x: Tensor) -> Tensor:
    """Half precision statistics in float32 (as torch): a square of 256 is inf in float16."""
    return x.float() if x.dtype in (dtypes.float16, dtypes.bfloat16) else x


class Linear:
    """y = x @ weight.T + bias, weight of shape (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        self.weight = uniform((out_features, in_features), -bound, bound)
        self.bias = uniform((out_features,), -bound, bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.transpose(), self.bias)


def _same_padding(padding: str, kernel: tuple[int, ...], stride: int | Sequence[int],
                  dilation: int | Sequence[int]) -> tuple[int, ...]:
    """padding='same' as (before, after) pairs, last axis first ((left, right, top, bottom) in 2-d): the
    output keeps the input's size; an odd total puts the extra row (column) at the end, as torch."""
    if padding.lower() != "same":
        raise ValueError(f"Conv2d padding {padding!r}: the only string accepted is 'same'")
    nd = len(kernel)
    if _per_axis(stride, nd) != (1,) * nd:
        raise ValueError(f"Conv2d padding='same' needs stride 1, got stride={stride}")
    totals = [d * (k - 1) for d, k in zip(_per_axis(dilation, nd), kernel)]
    return tuple(p for t in reversed(totals) for p in (t // 2, t - t // 2))


class Conv2d:
    """2-d convolution over NCHW input, weight (out, in // groups, kh, kw); a kernel_size of another length
    convolves over that many spatial axes (three: a volume, NCDHW), as tinygrad's Conv2d."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int = 1,
                 padding: int | Sequence[int] | str = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        self.kernel_size = _kernel_sizes(kernel_size)
        if isinstance(padding, str):
            padding = _same_padding(padding, self.kernel_size, stride, dilation)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1 / math.sqrt(in_channels * math.prod(self.kernel_size) / groups)
        self.weight = uniform((out_channels, in_channels // groups, *self.kernel_size), -bound, bound)
        self.bias = uniform((out_channels,), -bound, bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1,
                     stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1,
                     padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0) -> Tensor:
    """The transposed convolution, weight of shape (in, out // groups, kh, kw): `Tensor.conv_transpose2d`."""
    return x.conv_transpose2d(weight, bias, groups, stride, dilation, padding, output_padding)


class ConvTranspose2d(Conv2d):
    """The transposed 2-d convolution, weight (in, out // groups, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int = 1,
                 padding: int = 0, output_padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
        bound = 1 / math.sqrt(in_channels * math.prod(self.kernel_size) / groups)
        self.weight = uniform((in_channels, out_channels // groups, *self.kernel_size), -bound, bound)
        self.output_padding = output_padding

    def __call__(self, x: Tensor) -> Tensor:
        return conv_transpose2d(x, self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding,
                                self.output_padding)


def _same_padding_1d(padding: str, kernel: int, stride: int, dilation: int) -> tuple[int, int, int, int]:
    left, right, _, _ = _same_padding(padding, (1, kernel), (1, stride), (1, dilation))
    return (left, right, 0, 0)


class Conv1d:
    """1-d convolution over (N, C, L) input, weight (out, in // groups, k): a Conv2d over a height of 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int | str = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        (k,) = _single(kernel_size, "kernel_size")
        self.kernel_size, self.stride, self.dilation, self.groups = (k,), stride, dilation, groups
        self.padding = _same_padding_1d(padding, k, stride, dilation) if isinstance(padding, str) else padding
        bound = 1 / math.sqrt(in_channels * k / groups)
        self.weight = uniform((out_channels, in_channels // groups, k), -bound, bound)
        self.bias = uniform((out_channels,), -bound, bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _need_3d(x, "Conv1d")
        pad = self.padding if isinstance(self.padding, tuple) else (0, _single(self.padding, "padding")[0])
        y = x.unsqueeze(2).conv2d(self.weight.unsqueeze(2), self.bias, self.groups, (1, self.stride),
                                  (1, self.dilation), pad)
        return y.squeeze(2)


class ConvTranspose1d:
    """The transposed 1-d convolution, weight (in, out // groups, k): a ConvTranspose2d over a height of 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 output_padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        (k,) = _single(kernel_size, "kernel_size")
        self.kernel_size, self.stride, self.padding, self.output_padding = (k,), stride, padding, output_padding
        self.dilation, self.groups = dilation, groups
        bound = 1 / math.sqrt(in_channels * k / groups)
        self.weight = uniform((in_channels, out_channels // groups, k), -bound, bound)
        self.bias = uniform((out_channels,), -bound, bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _need_3d(x, "ConvTranspose1d")
        y = conv_transpose2d(x.unsqueeze(2), self.weight.unsqueeze(2), self.bias, self.groups, (1, self.stride),
                             (1, self.dilation), (0, self.padding), (0, self.output_padding))
        return y.squeeze(2)


def _single(v: int | Sequence[int], what: str) -> tuple[int]:
    if isinstance(v, int):
        return (v,)
    if len(v) != 1:
        raise ValueError(f"a 1-d convolution takes one {what}, got {v}")
    return (int(v[0]),)


def _need_3d(x: Tensor, layer: str) -> None:
    if x.ndim != 3:
        raise ValueError(f"{layer} needs (N, C, L) input, got shape {x.shape}")


class BatchNorm:
    """Batch normalization over the channel axis (axis 1) of (N, C, ...) input. In training
    (`Tensor.training`) it normalizes with the batch's statistics and updates the running ones (unbiased
    variance, as tinygrad); otherwise it uses the running statistics."""

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1):
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight: Tensor | None = Tensor.ones(sz) if affine else None
        self.bias: Tensor | None = Tensor.zeros(sz) if affine else None
        # the running statistics are state, not parameters: an optimizer realizes them, never trains them
        self.num_batches_tracked = Tensor.zeros(dtype="int64").is_param_(False)
        if track_running_stats:
            self.running_mean, self.running_var = Tensor.zeros(sz).is_param_(False), Tensor.ones(sz).is_param_(False)

    def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
        axes = tuple(a for a in range(x.ndim) if a != 1)
        xa = _acc(x)
        mean = xa.mean(axes)
        var = ((xa - mean.reshape(1, -1, *[1] * (x.ndim - 2))) ** 2).mean(axes)
        if not x.dtype.is_float:  # the statistics of an integer input are float (a mean cast back would truncate)
            return mean, var
        return mean.cast(x.dtype), var.cast(x.dtype)

    def __call__(self, x: Tensor) -> Tensor:
        shape = (1, -1, *[1] * (x.ndim - 2))
        if getattr(Tensor, "training", False) or not self.track_running_stats:
            mean, var = self.calc_stats(x)
            if getattr(Tensor, "training", False) and self.track_running_stats:
                n = x.numel() / x.shape[1]
                self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean)
                unbiased = var * (n / max(n - 1, 1))
                self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * unbiased)
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.reshape(shape)) * (var.reshape(shape) + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y


BatchNorm2d = BatchNorm3d = BatchNorm


class LayerNorm:
    """Normalization over the last len(normalized_shape) axes, with an elementwise affine."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.axis = tuple(-1 - i for i in range(len(self.normalized_shape)))
        self.eps = eps
        self.weight = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if tuple(x.shape[-len(self.normalized_shape):]) != self.normalized_shape:
            raise ValueError(f"LayerNorm{self.normalized_shape} cannot normalize input of shape {x.shape}")
        y = x.layernorm(self.axis, self.eps)
        return y if self.weight is None else y * self.weight + self.bias


class GroupNorm:
    """Normalization over groups of channels of (N, C, ...) input, with a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: {num_channels} channels do not split into {num_groups} groups")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = Tensor.ones(num_channels) if affine else None
        self.bias = Tensor.zeros(num_channels) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        y = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        if self.weight is None:
            return y
        shape = (1, -1, *[1] * (x.ndim - 2))
        return y * self.weight.reshape(shape) + self.bias.reshape(shape)


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channel axis of (N, C, H, W) input (normalized_shape is C)."""

    def __call__(self, x: Tensor) -> Tensor:
        return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class InstanceNorm:
    """Normalization of each channel of each sample of (N, C, ...) input over its other axes, with a
    per-channel affine."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
        self.num_features, self.eps = num_features, eps
        self.weight = Tensor.ones(num_features) if affine else None
        self.bias = Tensor.zeros(num_features) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ValueError(f"InstanceNorm({self.num_features}) cannot normalize input of shape {x.shape}")
        y = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
        if self.weight is None or self.bias is None:
            return y
        shape = (1, -1, *[1] * (x.ndim - 2))
        return y * self.weight.reshape(shape) + self.bias.reshape(shape)


class RMSNorm:
    """x / sqrt(mean(x^2) + eps) over the last axis, times a weight."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps = eps
        self.weight = Tensor.ones(dim) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        xa = _acc(x)
        y = (xa * ((xa * xa).mean(-1, keepdim=True) + self.eps).rsqrt()).cast(x.dtype)
        return y if self.weight is None else y * self.weight


class Embedding:
    """Rows of a (vocab_size, embed_size) table, looked up by integer indices: a one-hot comparison
    against an arange, times the table (one kernel, no gather op)."""

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        self.weight = Tensor.glorot_uniform(vocab_size, embed_size).realize()

    def __call__(self, idx: Tensor) -> Tensor:
        hot = idx.reshape(*idx.shape, 1) == Tensor.arange(self.vocab_sz)
        return hot.cast(self.weight.dtype) @ self.weight


class LSTMCell:
    """One step of an LSTM: gates i, f, g, o (in that order along the 4 * hidden rows of each weight) from
    the input and the hidden state; returns the new (h, c). Without `hc` the state starts at zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih = uniform((hidden_size * 4, input_size), -bound, bound)
        self.weight_hh = uniform((hidden_size * 4, hidden_size), -bound, bound)
        self.bias_ih: Tensor | None = Tensor.zeros(hidden_size * 4) if bias else None
        self.bias_hh: Tensor | None = Tensor.zeros(hidden_size * 4) if bias else None

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hc is None:
            zeros = Tensor.zeros(x.shape[0], self.weight_hh.shape[1], dtype=x.dtype)
            hc = (zeros, zeros)
        h, c = hc
        gates = x.linear(self.weight_ih.transpose(), self.bias_ih) + h.linear(self.weight_hh.transpose(), self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        new_c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * new_c.tanh(), new_c
