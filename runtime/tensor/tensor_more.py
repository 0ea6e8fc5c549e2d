"""More of the Tensor API, as tinygrad 0.14 has it (issue 11 §3), each method built from existing ops.

`MoreOps` is a base class of `Tensor` (runtime/tensor/tensor.py); its methods use only the public Tensor
methods and the Tensor class itself (imported where needed, to keep this module importable first).

Conventions (as tinygrad 0.14 unless said):
* gathers and tensor indexing are one-hot masks summed over the indexed axis (`_select_along`): an
  index out of range selects nothing and gives 0, as in tinygrad (no data-dependent check is possible);
* `sort` ranks every element against every other of its axis (O(n^2) work, one reduction): ties keep
  their order (stable), in both directions;
* random creation (`randint`, `uniform`, `dropout`'s mask) draws on the host like `rand`.
"""
from __future__ import annotations

import math
import string
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rulec.runtime.ir.ops import Ops
from rulec.runtime.tensor import tensor_args
from rulec.runtime.tensor.live import made_from
from rulec.runtime.tensor.tensor_extra import ExtraOps, free_const

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

Reduction = str
_REDUCTIONS = ("none", "sum", "mean")


def _dtypes() -> Any:
    from rulec.runtime.ir.dtype import dtypes

    return dtypes


def _to_dtype(dtype: Any) -> Any:
    """A dtype argument: a DType, its name, or None (as Tensor's own dtype arguments)."""
    from rulec.runtime.ir.dtype import DType

    if dtype is None or isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return _dtypes().from_name(dtype)
    raise TypeError(f"expected a dtype or a dtype name, not {type(dtype).__name__}")


class BitcastSizeError(RuntimeError, ValueError):
    """A bitcast whose last axis does not hold a whole number of the new dtype's elements."""


_UNSIGNED_SIZES = (1, 2, 4, 8)


def _unsigned_of_size(itemsize: int) -> Any:
    return {1: _dtypes().uint8, 2: _dtypes().uint16, 4: _dtypes().uint32, 8: _dtypes().uint64}[itemsize]


def _as_tensor(T: type, x: Any) -> Tensor:
    return x if isinstance(x, T) else T(x)


def _do_reduction(x: Tensor, reduction: Reduction) -> Tensor:
    if reduction == "none":
        return x
    if reduction == "sum":
        return x.sum()
    if reduction == "mean":
        return x.mean()
    raise ValueError(f"reduction must be one of {_REDUCTIONS}, not {reduction!r}")


def _check_smoothing(label_smoothing: float) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")


# Up to this many writers along scatter's axis, the last writer of each place is picked by a chain of
# selects, one per writer (elementwise, as tinygrad: its backward pass is two kernels). More are ranked by
# a max reduce over their positions, which keeps the graph small: one kernel too, but the backward pass
# stores the ranking (two kernels more).
_UNROLLED_WRITERS = 32


def last_writer_chain(hit: Tensor, vals: Tensor, d: int) -> tuple[Tensor, Tensor]:
    """(written, value) where a later writer overrides an earlier (scatter without a reduce, setitem with
    repeated indices): hit is the one-hot (.., m, n, ..) of where each of the m writers along axis d goes,
    vals (.., m, 1, ..) what it writes."""
    def writer(t: Tensor, j: int) -> Tensor:
        return t.shrink(tuple((j, j + 1) if i == d else None for i in range(t.ndim))).squeeze(d)
    written, new = writer(hit, 0), writer(hit, 0).where(writer(vals, 0), 0)
    for j in range(1, hit.shape[d]):
        h = writer(hit, j)
        written, new = written | h, h.where(writer(vals, j), new)
    return written, new


def _reduced_writes(hit: Tensor, vals: Tensor, d: int, reduce: str | None) -> Tensor:
    """What scatter writes into each place, by reduces over the writers along axis d: the last writer's
    value (the largest position that hits the place), or the writers added or multiplied together."""
    if reduce is None:
        m = hit.shape[d]
        pos = type(hit).arange(m).reshape(tuple(m if i == d else 1 for i in range(hit.ndim)))
        last = hit.where(pos, -1).max(d, keepdim=True)
        return (hit & (pos == last)).where(vals, 0).sum(d)
    if reduce == "add":
        return hit.where(vals, 0).sum(d)
    return hit.where(vals, 1).prod(d)


def _ceil_extra(i: int, k: int, s: int, d: int, pads: tuple[int, int], ceil_mode: bool) -> int:
    """Extra right padding that ceil_mode needs so the last partial window exists (torch's rule: a window
    must start inside the input or the left padding)."""
    span = d * (k - 1) + 1
    full = i + pads[0] + pads[1]
    if full < span:
        raise tensor_args.WindowShapeError(f"pooling window {span} is larger than the padded input {full}")
    if not ceil_mode:
        return 0
    out = -(-(full - span) // s) + 1
    if (out - 1) * s >= i + pads[0]:
        out -= 1
    return max(0, (out - 1) * s + span - full)


class MoreOps(ExtraOps):
    __slots__ = ()
    training: bool = False  # dropout only drops while True (tinygrad's Tensor.training)

    # ------------------------------------------------------------------ activations

    def elu(self: Tensor, alpha: float = 1.0) -> Tensor:
        return self.relu() - alpha * (1 - self.exp()).relu()

    def celu(self: Tensor, alpha: float = 1.0) -> Tensor:
        return self.maximum(0) + (alpha * ((self / alpha).exp() - 1)).minimum(0)

    def selu(self: Tensor, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor:
        return gamma * (self >= 0).where(self, alpha * (self.exp() - 1))

    def silu(self: Tensor) -> Tensor:
        return self * self.sigmoid()

    def swish(self: Tensor) -> Tensor:
        return self.silu()

    def leaky_relu(self: Tensor, neg_slope: float = 0.01) -> Tensor:
        return (self < 0).where(neg_slope * self, self)

    def logaddexp(self: Tensor, x: Any) -> Tensor:
        """log(e^a + e^b) without overflow: max + log(1 + e^-(|a - b|))."""
        a, b = type(self)._operands(self, x)
        m = a.maximum(b)
        return m + (1 + (-(a - b).abs()).exp()).log()

    def softplus(self: Tensor, beta: float = 1.0) -> Tensor:
        return (1 / beta) * (self * beta).logaddexp(0.0)

    def mish(self: Tensor) -> Tensor:
        return self * self.softplus().tanh()

    def relu6(self: Tensor) -> Tensor:
        return self.relu() - (self - 6).relu()

    def hardswish(self: Tensor) -> Tensor:
        return self * (self + 3).relu6() * (1 / 6)

    def hardsigmoid(self: Tensor, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        return (alpha * self + beta).relu() - (alpha * self + beta - 1).relu()

    def hardtanh(self: Tensor, min_val: float = -1, max_val: float = 1) -> Tensor:
        return self.clip(min_val, max_val)

    def softsign(self: Tensor) -> Tensor:
        return self / (1 + self.abs())

    def logsigmoid(self: Tensor) -> Tensor:
        return -(-self).softplus()

    def clamp(self: Tensor, min_: Any = None, max_: Any = None) -> Tensor:
        return self.clip(min_, max_)

    # ------------------------------------------------------------------ rounding, tests, bits

    def trunc(self: Tensor) -> Tensor:
        """Round toward zero: the TRUNC op (each backend's trunc; NaN and inf stay), whose gradient is 0
        (rules/gradient.yaml), as tinygrad's."""
        if not self.dtype.is_float:
            return self
        return self._unary(Ops.TRUNC)

    def floor(self: Tensor) -> Tensor:
        t = self.trunc()
        return t if not self.dtype.is_float else (t > self).where(t - 1, t)

    def ceil(self: Tensor) -> Tensor:
        t = self.trunc()
        return t if not self.dtype.is_float else (t < self).where(t + 1, t)

    def round(self: Tensor) -> Tensor:
        """Half to even, as numpy and tinygrad."""
        if not self.dtype.is_float:
            return self
        f = self.floor()
        d = self - f
        odd = (f - 2 * (f * 0.5).floor()) != 0
        return ((d > 0.5) | ((d == 0.5) & odd)).where(f + 1, f)

    def isnan(self: Tensor) -> Tensor:
        return self != self

    def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        pos = (self == math.inf) if detect_positive else self.const_like(False, dtype="bool")
        return (pos | (self == -math.inf)) if detect_negative else pos

    def isfinite(self: Tensor) -> Tensor:
        return (self.isinf() | self.isnan()).logical_not()

    def bitcast(self: Tensor, dtype: Any) -> Tensor:
        """Reinterpret the bits in another dtype (the BITCAST op of docs/tensor-ir.md). Between sizes, the
        last axis holds the same bytes (little-endian): 8 int8 become 2 int32 and back."""
        from rulec.runtime.ir.ops import Ops
        from rulec.runtime.ir.uop import UOp

        dt = _to_dtype(dtype)
        if dt is None:
            raise ValueError(f"bitcast needs a dtype, got {dtype!r}")
        if dt.itemsize != self.dtype.itemsize:
            return self._bitcast_resized(dt)
        return self if dt == self.dtype else made_from(type(self)(UOp(Ops.BITCAST, dt, (self.uop,))), self)

    def _bitcast_resized(self: Tensor, dt: Any) -> Tensor:
        """A bitcast to a dtype of another size rescales the last axis (as tinygrad): the bytes are regrouped,
        little-endian, through unsigned integers of each size: k narrow lanes shifted into one wide value, or
        one wide value shifted into k narrow lanes."""
        old, new = self.dtype.itemsize, dt.itemsize
        if _dtypes().bool in (self.dtype, dt) or old not in _UNSIGNED_SIZES or new not in _UNSIGNED_SIZES:
            raise BitcastSizeError(f"bitcast from {self.dtype.name} to {dt.name}: no such regrouping of bytes")
        if self.ndim == 0 or not isinstance(self.shape[-1], int) or (self.shape[-1] * old) % new != 0:
            raise BitcastSizeError(f"bitcast from {self.dtype.name} to {dt.name} needs a last axis whose bytes fill "
                                   f"whole {dt.name} values, got shape {self.shape}")
        old_u, new_u = _unsigned_of_size(old), _unsigned_of_size(new)
        bits = self.bitcast(old_u)
        if new > old:  # gather `new // old` neighbours, the first in the lowest bytes
            lanes = bits.reshape(*self.shape[:-1], self.shape[-1] * old // new, new // old)
            parts = [lanes[..., i].cast(new_u) << (8 * old * i) for i in range(new // old)]
            packed = parts[0]
            for part in parts[1:]:
                packed = packed | part
            return packed.bitcast(dt)
        pieces = [(bits >> (8 * new * i)).cast(new_u) for i in range(old // new)]
        return type(self).stack(*pieces, dim=-1).flatten(-2).bitcast(dt)

    # ------------------------------------------------------------------ reductions

    def logsumexp(self: Tensor, axis: Any = None, keepdim: bool = False) -> Tensor:
        """log(sum(exp(x))) shifted by the max (an infinite max shifts by 0, so -inf rows stay -inf). The
        shift cancels in the result, so its gradient is zero: detached, the backward pass has no
        tie-counting reduces through the max (as tinygrad's)."""
        m = self._to_float().max(axis, keepdim=True).detach()
        m = m.isinf().where(0.0, m)
        out = (self - m).exp().sum(axis, keepdim=keepdim).log()
        return out + (m if keepdim else m.reshape(out.shape))

    def any(self: Tensor, axis: Any = None, keepdim: bool = False) -> Tensor:
        return self.bool().max(axis, keepdim)

    def all(self: Tensor, axis: Any = None, keepdim: bool = False) -> Tensor:
        return self.logical_not().any(axis, keepdim).logical_not()

    # ------------------------------------------------------------------ division

    def _floor_div(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """Python's `//`: floats floor the quotient; integers round toward -inf (IDIV truncates)."""
        from rulec.runtime.ir.ops import Ops

        T = type(self)
        a, b = T._operands(x, self) if reverse else T._operands(self, x)
        if a.dtype.is_float:
            return (a / b).floor()
        if a.dtype.kind == "bool":
            raise TypeError(f"// needs integer or float tensors, not bool (shape {a.shape})")
        q = a._int_op(Ops.IDIV, b)
        if a.dtype.kind == "uint":
            return q
        r = a._int_op(Ops.MOD, b)
        return ((r != 0) & ((r < 0) != (b < 0))).where(q - 1, q)

    def _floor_mod(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """Python's `%`: the remainder takes the divisor's sign (MOD truncates, as C)."""
        from rulec.runtime.ir.ops import Ops

        T = type(self)
        a, b = T._operands(x, self) if reverse else T._operands(self, x)
        if a.dtype.is_float:
            return a - (a / b).floor() * b
        if a.dtype.kind == "bool":
            raise TypeError(f"% needs integer or float tensors, not bool (shape {a.shape})")
        r = a._int_op(Ops.MOD, b)
        if a.dtype.kind == "uint":
            return r
        return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)

    def _int_op(self: Tensor, op: Any, b: Tensor) -> Tensor:
        from rulec.runtime.ir.uop import UOp

        return type(self)(UOp(op, self.dtype, (self.uop, b.uop)))

    def mod(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._floor_mod(x, reverse)

    def idiv(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """Integer division rounding toward zero (C), as tinygrad's `div(rounding_mode="trunc")`."""
        from rulec.runtime.ir.ops import Ops

        T = type(self)
        a, b = T._operands(x, self) if reverse else T._operands(self, x)
        return (a / b).trunc() if a.dtype.is_float else a._int_op(Ops.IDIV, b)

    # ------------------------------------------------------------------ pooling, resizing, attention

    def _pool_nd(self: Tensor, name: str, kernel_size: Any, stride: Any, dilation: Any, padding: Any,
                 ceil_mode: bool, value: float) -> tuple[Tensor, list[tuple[int, int]], tuple, tuple, tuple]:
        """Padded (with `value`, plus ceil_mode's extra right padding) sliding windows of the last axes."""
        nd = len(tensor_args.int_tuple(kernel_size, (), f"{name} kernel_size")) \
            if isinstance(kernel_size, (tuple, list)) else 2
        if self.ndim < nd:
            raise ValueError(f"{name} needs at least {nd} axes, got shape {self.shape}")
        ks = tensor_args.tuple_of(kernel_size, nd, f"{name} kernel_size")
        st = ks if stride is None else tensor_args.tuple_of(stride, nd, f"{name} stride")
        dl = tensor_args.tuple_of(dilation, nd, f"{name} dilation")
        pads = tensor_args.pool_pads(padding, nd, name)
        ins = self.shape[-nd:]
        full = [(b, a + _ceil_extra(i, k, s, d, (b, a), ceil_mode))
                for i, k, s, d, (b, a) in zip(ins, ks, st, dl, pads)]
        x = self.pad(((0, 0),) * (self.ndim - nd) + tuple(full), value=value)
        return x._pool(ks, st, dl), full, ks, st, dl

    def max_pool2d(self: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Any:
        """Max over windows of the last len(kernel_size) axes (2 for an int), padded with -inf."""
        fill = -math.inf if self.dtype.is_float else self.dtype.min
        win, _, ks, _, _ = self._pool_nd("max_pool2d", kernel_size, stride, dilation, padding, ceil_mode, fill)
        nk = len(ks)
        out = win.max(tuple(range(-nk, 0)))
        if not return_indices:
            return out
        idx = self._pool_positions(kernel_size, stride, dilation, padding, ceil_mode)
        hit = win == out.reshape(out.shape + (1,) * nk)
        # the first maximum of each window, as the flat index into the input's pooled axes
        big = int(np.prod(self.shape[-nk:]))
        first = hit.where(idx, big).min(tuple(range(-nk, 0)))
        # int32 as tinygrad 0.14 (torch gives int64); int64 only where a position would not fit
        return out, first.cast(_dtypes().int32 if big <= _dtypes().int32.max else _dtypes().int64)

    def _pool_positions(self: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any,
                        ceil_mode: bool) -> Tensor:
        """The flat input position of every element of every window (padding is never the maximum)."""
        T = type(self)
        nk = 2 if not isinstance(kernel_size, (tuple, list)) else len(kernel_size)
        pos = T.arange(int(np.prod(self.shape[-nk:]))).reshape(self.shape[-nk:])
        return pos._pool_nd("max_pool2d", kernel_size, stride, dilation, padding, ceil_mode, -1)[0]

    def avg_pool2d(self: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        """Mean over windows. The divisor counts the input (and the padding if count_include_pad), never
        ceil_mode's extra padding (torch's and tinygrad's rule): it is the same pooling of a ones mask."""
        T = type(self)
        win, full, ks, st, dl = self._pool_nd("avg_pool2d", kernel_size, stride, dilation, padding, ceil_mode, 0.0)
        nk = len(ks)
        axes = tuple(range(-nk, 0))
        win = win._to_float()  # a float input keeps its dtype (half pools in half, as tinygrad)
        # the divisor's mask has no device (tinygrad's const_like): pooling an arange stays virtual
        ones = free_const(T, 1.0, win.dtype, self.shape[-nk:])
        pads = tensor_args.pool_pads(padding, nk, "avg_pool2d")
        if count_include_pad:
            ones = ones.pad(tuple(pads), value=1.0)
            extra = tuple((0, a - p[1]) for (_, a), p in zip(full, pads))
            counted = ones.pad(extra)._pool(ks, st, dl)
        else:
            counted = ones.pad(tuple(full))._pool(ks, st, dl)
        return win.sum(axes) / counted.sum(axes)

    def interpolate(self: Tensor, size: Any, mode: str = "linear", align_corners: bool = False) -> Tensor:
        """Resize the last len(size) axes: "linear" (n-linear), "nearest" or "nearest-exact", as torch. Each
        axis is a contraction with a (new, old) weight matrix built from arange comparisons."""
        size = tensor_args.int_tuple(size, (), "interpolate size")
        if len(size) > self.ndim or min(size, default=1) < 1:
            raise ValueError(f"interpolate size {size} does not fit shape {self.shape}")
        if mode not in ("linear", "nearest", "nearest-exact"):
            raise ValueError(f"interpolate mode must be linear, nearest or nearest-exact, not {mode!r}")
        x = self._to_float()
        # uint8 images blend in fixed point after each axis, as tinygrad's uint8 lerp: weights in 1/128ths,
        # the result rounded (other dtypes blend in float and truncate)
        round_each = mode == "linear" and self.dtype.name == "uint8"
        for ax in reversed(range(self.ndim - len(size), self.ndim)):  # last axis first, as tinygrad
            x = x._resize_axis(ax, size[ax - self.ndim + len(size)], mode, align_corners, 128 if round_each else None)
            x = (x + 0.5).floor() if round_each else x
        return x.cast(self.dtype) if not self.dtype.is_float else x

    def _resize_axis(self: Tensor, ax: int, out: int, mode: str, align_corners: bool,
                     weight_steps: int | None = None) -> Tensor:
        T = type(self)
        n = self.shape[ax]
        if n == out:
            return self
        o = T.arange(out, dtype="float32").reshape(out, 1)
        i = T.arange(n, dtype="float32").reshape(1, n)
        if mode == "linear":
            if align_corners:
                src = o * ((n - 1) / (out - 1)) if out > 1 else o * 0
            else:
                src = ((o + 0.5) * (n / out) - 0.5).maximum(0.0)
            lo = src.floor().minimum(n - 1)
            hi = (lo + 1).minimum(n - 1)
            w = src - lo
            w = w if weight_steps is None else (w * weight_steps + 0.5).floor() / weight_steps
            weight = (i == lo).where(1 - w, 0.0) + (i == hi).where(w, 0.0)
        else:
            shift = 0.5 if mode == "nearest-exact" else 0.0
            src = ((o + shift) * (n / out)).floor().minimum(n - 1)
            weight = (i == src).where(1.0, 0.0)
        x = self.transpose(ax, -1).unsqueeze(-2)  # (..., 1, n)
        return (x * weight.cast(self.dtype)).sum(-1).transpose(ax, -1)

    def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False,
                                     enable_gqa: bool = False) -> Tensor:
        """softmax(q k^T / sqrt(d) + mask) v. A bool mask keeps where True; a float mask is added;
        is_causal keeps the lower triangle (with no attn_mask, as torch); enable_gqa repeats k/v heads."""
        T = type(self)
        if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
            raise ValueError(f"scaled_dot_product_attention needs q, k, v of >= 2 axes, got "
                             f"{self.shape}, {key.shape}, {value.shape}")
        if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
            if self.shape[-3] % key.shape[-3]:
                raise ValueError(f"enable_gqa: {self.shape[-3]} query heads are not a multiple of {key.shape[-3]}")
            rep = self.shape[-3] // key.shape[-3]
            key, value = key.repeat_interleave(rep, -3), value.repeat_interleave(rep, -3)
        if is_causal:
            if attn_mask is not None:
                raise tensor_args.BadArgError("scaled_dot_product_attention takes is_causal or attn_mask, not both")
            attn_mask = free_const(T, True, "bool", (self.shape[-2], key.shape[-2])).tril()
        qk = self.matmul(key.transpose(-2, -1)) * (1 / math.sqrt(self.shape[-1]))
        if attn_mask is not None:
            qk = attn_mask.where(qk, -math.inf) if attn_mask.dtype.kind == "bool" else qk + attn_mask
        return qk.softmax(-1).dropout(dropout_p).matmul(value)

    # ------------------------------------------------------------------ losses

    def binary_crossentropy(self: Tensor, Y: Tensor, reduction: Reduction = "mean") -> Tensor:
        """self holds probabilities."""
        return _do_reduction(-Y * self.log() - (1 - Y) * (1 - self).log(), reduction)

    def binary_crossentropy_logits(self: Tensor, Y: Tensor, reduction: Reduction = "mean",
                                   pos_weight: Tensor | None = None) -> Tensor:
        pw = 1 if pos_weight is None else pos_weight
        return _do_reduction(-(pw * Y * self.logsigmoid() + (1 - Y) * (-self).logsigmoid()), reduction)

    def sparse_categorical_crossentropy(self: Tensor, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,
                                        reduction: Reduction = "mean") -> Tensor:
        """self: logits with the classes on the last axis; Y: class indices. ignore_index=-1 ignores
        nothing (an index of -1 then matches no class), as tinygrad; "mean" divides by the samples kept."""
        _check_smoothing(label_smoothing)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, not {reduction!r}")
        Y = tensor_args.int_index(type(self), Y, "sparse_categorical_crossentropy Y")
        if Y.shape != self.shape[:-1]:
            raise ValueError(f"sparse_categorical_crossentropy: labels {Y.shape} do not match logits {self.shape}")
        logp = self.log_softmax(-1)
        keep = (Y != ignore_index) if ignore_index != -1 else Y.const_like(True, dtype="bool")
        y = tensor_args.one_hot_along(Y, self.shape[-1], -1) & keep.unsqueeze(-1)
        picked = y.where(logp, 0.0).sum(-1)
        loss = (1 - label_smoothing) * picked + label_smoothing * keep.where(logp.mean(-1), 0.0)
        return -loss.sum() / keep.sum() if reduction == "mean" else -_do_reduction(loss, reduction)

    def cross_entropy(self: Tensor, Y: Tensor, reduction: Reduction = "mean", label_smoothing: float = 0.0) -> Tensor:
        """self: logits with the classes on axis 1 (0 for 1-d); Y: probabilities of self's shape, or class
        indices without the class axis."""
        _check_smoothing(label_smoothing)
        cdim = 0 if self.ndim == 1 else 1
        if Y.shape != self.shape:
            if Y.shape != self.shape[:cdim] + self.shape[cdim + 1:]:
                raise tensor_args.BadArgError(f"cross_entropy: target {Y.shape} does not match logits {self.shape}")
            Y = tensor_args.one_hot_along(tensor_args.int_index(type(self), Y, "cross_entropy Y"), self.shape[cdim], cdim).where(1.0, 0.0)
        Y = (1 - label_smoothing) * Y + label_smoothing / self.shape[cdim]
        return _do_reduction(-(self.log_softmax(cdim) * Y).sum(cdim), reduction)

    def nll_loss(self: Tensor, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,
                 reduction: Reduction = "mean") -> Tensor:
        """self: log-probabilities with the classes on axis 1; "mean" is weighted by the picked weights."""
        cdim = 0 if self.ndim == 1 else 1
        Y = tensor_args.int_index(type(self), Y, "nll_loss Y")
        hit = tensor_args.one_hot_along(Y, self.shape[cdim], cdim)
        if ignore_index is not None:
            hit = hit & (Y != ignore_index).unsqueeze(cdim)
        w = hit.where(1.0, 0.0) if weight is None else hit.where(weight.reshape(
            tuple(-1 if i == cdim else 1 for i in range(self.ndim))), 0.0)
        loss = -(w * self).sum(cdim)
        if reduction == "mean":
            return loss.sum() / w.sum()
        return _do_reduction(loss, reduction)

    # ------------------------------------------------------------------ indexing and masking

    def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
        """int32 one-hot along a new last axis; num_classes=-1 reads the largest class (a realization)."""
        idx = tensor_args.int_index(type(self), self, "one_hot")
        if num_classes == -1:
            num_classes = int(idx.max().item()) + 1 if idx.numel() else 0
        n = tensor_args.as_int(num_classes, "one_hot num_classes")
        return tensor_args.one_hot_along(idx, n, -1).cast(_dtypes().int32)

    def _select_along(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """out[..., j, ...] = self[..., index[..., j, ...], ...] on `dim`, where self has index's shape on
        the other axes: a one-hot mask summed over the indexed axis (out of range: 0)."""
        n = self.shape[dim]
        index = (index < 0).where(index + n, index)
        hit = tensor_args.one_hot_along(index, n, dim + 1)  # (.., m, n, ..): the new axis just after dim
        vals = self.unsqueeze(dim)  # (.., 1, n, ..)
        out = hit.where(vals, 0).sum(dim + 1)
        return out.cast(self.dtype)

    def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """out[i][j] = self[index[i][j]][j] for dim 0 (and so on), as torch.gather; index may be smaller than
        self on the other axes."""
        index = tensor_args.int_index(type(self), index, "gather index")
        d = tensor_args.axis(dim, self.ndim, self.shape)
        if index.ndim != self.ndim or any(a > b for i, (a, b) in enumerate(zip(index.shape, self.shape)) if i != d):
            raise tensor_args.BadArgError(f"gather: index {index.shape} does not fit self {self.shape} on dim {dim}")
        x = self.shrink(tuple(None if i == d else (0, s) for i, s in enumerate(index.shape)))
        return x._select_along(d, index)

    def scatter(self: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None = None) -> Tensor:
        """self[index[i][j]][j] = src[i][j] for dim 0 (and so on), as torch.scatter; when several write one
        place, the last wins (reduce=None), or they add / multiply into self."""
        T = type(self)
        index = tensor_args.int_index(type(self), index, "scatter index")
        d = tensor_args.axis(dim, self.ndim, self.shape)
        if reduce not in (None, "add", "multiply"):
            raise ValueError(f"scatter reduce must be None, 'add' or 'multiply', not {reduce!r}")
        if index.ndim != self.ndim or any(a > b for i, (a, b) in enumerate(zip(index.shape, self.shape)) if i != d):
            raise tensor_args.BadArgError(f"scatter: index {index.shape} does not fit self {self.shape} on dim {dim}")
        if isinstance(src, T):
            if src.ndim != index.ndim or any(a < b for a, b in zip(src.shape, index.shape)):
                raise tensor_args.BadArgError(f"scatter: src {src.shape} is smaller than index {index.shape}")
            src = src.shrink(tuple((0, s) for s in index.shape)).cast(self.dtype)
        else:
            src = free_const(T, src, self.dtype, index.shape)
        n, m = self.shape[d], index.shape[d]
        index = (index < 0).where(index + n, index)
        hit = tensor_args.one_hot_along(index, n, d + 1)  # (.., m, n, ..)
        vals = src.unsqueeze(d + 1)
        if reduce is None and 0 < m <= _UNROLLED_WRITERS:
            written, new = last_writer_chain(hit, vals, d)
        else:
            written, new = hit.any(d), _reduced_writes(hit, vals, d, reduce)
        new = new.cast(self.dtype)
        grow = tuple((0, 0) if i == d else (0, s - t) for i, (s, t) in enumerate(zip(self.shape, written.shape)))
        written, new = written.pad(grow), new.pad(grow)
        if reduce is None:
            return written.where(new, self)
        return written.where(self + new if reduce == "add" else self * new, self)

    def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        return mask.where(value, self)

    def _tri(self: Tensor, diagonal: int, upper: bool) -> Tensor:
        T = type(self)
        if self.ndim < 2:
            raise ValueError(f"{'triu' if upper else 'tril'} needs at least 2 axes, got shape {self.shape}")
        r, c = self.shape[-2:]
        diff = T.arange(c).reshape(1, c) - T.arange(r).reshape(r, 1)  # column - row
        keep = (diff >= diagonal) if upper else (diff <= diagonal)
        return keep.where(self, 0).cast(self.dtype)

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        return self._tri(diagonal, upper=False)

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        return self._tri(diagonal, upper=True)

    # ------------------------------------------------------------------ sorting and scans

    def sort(self: Tensor, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, indices) along `dim`. An element's place is the number of elements before it in the
        order (ties broken by position: stable); the outputs are the elements scattered to their places."""
        T = type(self)
        d = tensor_args.axis(dim, max(self.ndim, 1), self.shape)
        if self.ndim == 0:
            return self, T.zeros((), dtype="int32")
        x = self.transpose(d, -1)
        n = x.shape[-1]
        a, b = x.unsqueeze(-1), x.unsqueeze(-2)  # a[..., i, j] = x_i, b[..., i, j] = x_j
        i_, j_ = T.arange(n).reshape(n, 1), T.arange(n).reshape(1, n)
        before, tie = ((b > a) if descending else (b < a)), (b == a)
        if self.dtype.is_float:  # NaN is greater than every number (numpy: last ascending; torch: first descending)
            nan_a, nan_b = a != a, b != b
            before = before | ((nan_b & nan_a.logical_not()) if descending else (nan_a & nan_b.logical_not()))
            tie = tie | (nan_a & nan_b)  # without it, two NaNs would go to one place and leave another empty
        place = (before | (tie & (j_ < i_))).sum(-1)  # (..., n): where x_i goes
        at = place.unsqueeze(-1) == T.arange(n).reshape(1, n)  # at[..., i, p]: x_i goes to p
        values = at.where(a, 0).sum(-2).cast(self.dtype)
        indices = at.where(i_, 0).sum(-2).cast(_dtypes().int32)
        return values.transpose(d, -1), indices.transpose(d, -1)

    def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
        return self.sort(dim, descending)[1]

    def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
        d = tensor_args.axis(dim, self.ndim, self.shape)
        k = tensor_args.as_int(k, "topk k")
        if not 0 <= k <= self.shape[d]:
            raise ValueError(f"topk k={k} is out of range for axis {dim} of shape {self.shape}")
        values, indices = self.sort(d, descending=largest)
        keep = tuple((0, k) if i == d else None for i in range(self.ndim))
        return values.shrink(keep), indices.shrink(keep)

    def _cum_extreme(self: Tensor, axis: int, largest: bool) -> tuple[Tensor, Tensor]:
        T = type(self)
        if self.ndim == 0:  # its only axis is 0 (or -1)
            tensor_args.axis(axis, 1, self.shape)
            return self, T.zeros((), dtype="int32")
        ax = tensor_args.axis(axis, self.ndim, self.shape)
        x = self.transpose(ax, -1)
        n = x.shape[-1]
        lower = T.arange(n).reshape(n, 1) >= T.arange(n).reshape(1, n)  # [j, i]: i <= j
        vals = x.unsqueeze(-2)
        if largest:
            values = lower.where(vals, -math.inf if self.dtype.is_float else self.dtype.min).max(-1)
        else:
            values = lower.where(vals, math.inf if self.dtype.is_float else self.dtype.max).min(-1)
        values = values.cast(self.dtype)
        # the first position reaching the running extreme (tinygrad's choice)
        running = values.unsqueeze(-1)
        same = vals == running
        if self.dtype.is_float:  # a NaN equals nothing: its running NaN is reached first at the first NaN
            same = same | ((vals != vals) & (running != running))
        hit = lower & same
        idx = hit.where(T.arange(n).reshape(1, n), n).min(-1).cast(_dtypes().int32)
        return values.transpose(ax, -1), idx.transpose(ax, -1)

    def cummax(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        return self._cum_extreme(axis, largest=True)

    def cummin(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        return self._cum_extreme(axis, largest=False)

    # ------------------------------------------------------------------ creation and random

    @classmethod
    def eye(cls, n: int, m: int | None = None, dtype: Any = None, device: str | None = None) -> Tensor:
        T = cls
        n = tensor_args.as_int(n, "eye n")
        m = n if m is None else tensor_args.as_int(m, "eye m")
        if n < 0 or m < 0:
            raise ValueError(f"eye needs sizes >= 0, got {n} and {m}")
        out = T.arange(n, device=device).reshape(n, 1) == T.arange(m, device=device).reshape(1, m)
        return out.cast(_to_dtype(dtype) or _dtypes().float32)

    @classmethod
    def linspace(cls, start: float, stop: float, steps: int, dtype: Any = None, device: str | None = None) -> Tensor:
        """`steps` evenly spaced values from start to stop inclusive (float32 by default)."""
        T = cls
        steps = tensor_args.as_int(steps, "linspace steps")
        if steps < 0:
            raise ValueError(f"linspace steps must be >= 0, got {steps}")
        dt = _to_dtype(dtype) or _dtypes().float32
        if dt == _dtypes().bool:
            raise ValueError("linspace cannot make bool values: give a number dtype")
        if steps == 1:
            return T.full((1,), start, dtype=dt, device=device)
        step = (stop - start) / (steps - 1) if steps > 1 else 0.0
        return (T.arange(steps, dtype="float32", device=device) * step + start).cast(dt)

    @classmethod
    def randint(cls, *shape: Any, low: int = 0, high: int = 10, dtype: Any = "int32", seed: int | None = None,
                device: str | None = None) -> Tensor:
        """Integers uniform in [low, high), drawn on the host like `rand`."""
        T = cls
        from rulec.runtime import buffers

        shape = tensor_args.new_shape(shape)
        low, high = tensor_args.as_int(low, "randint low"), tensor_args.as_int(high, "randint high")
        if low >= high:
            raise ValueError(f"randint needs low < high, got low={low}, high={high}")
        dt = _to_dtype(dtype)
        if dt is None or dt.kind not in ("int", "uint"):
            raise TypeError(f"randint dtype must be an integer dtype, not {dtype}")
        values = T._rng(seed).integers(low, high, size=shape)
        return T(np.asarray(values).astype(buffers.numpy_dtype(dt)), device, dtype=dt)

    @classmethod
    def uniform(cls, *shape: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None, **kwargs: Any) -> Tensor:
        T = cls
        dt = _to_dtype(dtype) or _dtypes().float32
        return ((high - low) * T.rand(*shape, **kwargs)).cast(dt) + low

    @classmethod
    def normal(cls, *shape: Any, mean: float = 0.0, std: float = 1.0, **kwargs: Any) -> Tensor:
        return (std * cls.randn(*shape, **kwargs)) + mean

    @classmethod
    def scaled_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        size = int(np.prod(tensor_args.new_shape(shape)))
        return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs) * (size ** -0.5)

    @classmethod
    def glorot_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        s = tensor_args.new_shape(shape)
        bound = math.sqrt(6 / (s[0] + int(np.prod(s[1:]))))
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_uniform(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Uniform in +-sqrt(3) * gain / sqrt(fan_in), gain = sqrt(2 / (1 + a^2)), fan_in = prod(shape[1:])."""
        s = tensor_args.new_shape(shape)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(int(np.prod(s[1:])))
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    def dropout(self: Tensor, p: float = 0.5) -> Tensor:
        """Zero each element with probability p and scale the rest by 1/(1-p), only while Tensor.training."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout p must be in [0, 1], got {p}")
        T = type(self)
        if not T.training or p == 0:
            return self
        if p == 1:  # every element dropped: zeros, with no kernel (x * 0 would keep inf and nan as nan)
            return self.zeros_like()
        keep = self.rand_like(dtype=_dtypes().default_float) >= p  # on self's devices, laid out as self
        return keep.where(self, 0) * (1 / (1 - p))

    # ------------------------------------------------------------------ shape and copying

    def repeat(self: Tensor, repeats: Any, *args: int) -> Tensor:
        """Tile as torch.repeat: one count per axis, extra counts add leading axes."""
        reps = tensor_args.int_tuple(repeats, args, "repeats")
        if len(reps) < self.ndim or min(reps, default=0) < 0:
            raise ValueError(f"repeat needs >= {self.ndim} counts >= 0, got {reps} for shape {self.shape}")
        shape = (1,) * (len(reps) - self.ndim) + self.shape
        x = self.reshape(tuple(v for s in shape for v in (1, s)))
        x = x.expand(tuple(v for r, s in zip(reps, shape) for v in (r, s)))
        return x.reshape(tuple(r * s for r, s in zip(reps, shape)))

    def repeat_interleave(self: Tensor, repeats: int, dim: int | None = None) -> Tensor:
        x = self.flatten() if dim is None else self
        d = 0 if dim is None else tensor_args.axis(dim, x.ndim, x.shape)
        r = tensor_args.as_int(repeats, "repeat_interleave repeats")
        x = x.unsqueeze(d + 1)
        x = x.expand(tuple(r if i == d + 1 else s for i, s in enumerate(x.shape)))
        return x.reshape(x.shape[:d] + (x.shape[d] * r,) + x.shape[d + 2:])

    def split(self: Tensor, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of `sizes` each (the last may be smaller), or of the listed sizes, along dim."""
        d = tensor_args.axis(dim, self.ndim, self.shape)
        n = self.shape[d]
        if isinstance(sizes, int) and not isinstance(sizes, bool):
            if sizes <= 0:
                raise ValueError(f"split size must be > 0, got {sizes}")
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
        else:
            sizes = list(tensor_args.int_tuple(sizes, (), "split sizes"))
            if sum(sizes) != n or min(sizes, default=0) < 0:
                raise ValueError(f"split sizes {sizes} do not add up to {n} (axis {dim} of shape {self.shape})")
        offs = np.cumsum([0] + sizes)
        return tuple(self.shrink(tuple((int(offs[k]), int(offs[k + 1])) if i == d else None for i in range(self.ndim)))
                     for k in range(len(sizes)))

    def chunk(self: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
        chunks = tensor_args.as_int(chunks, "chunk chunks")
        if chunks <= 0:
            raise ValueError(f"chunk needs chunks > 0, got {chunks}")
        d = tensor_args.axis(dim, self.ndim, self.shape)
        n = self.shape[d]
        return list(self.split(math.ceil(n / chunks) if n else 1, d)) if n else [self] * chunks

    def clone(self: Tensor, device: str | None = None) -> Tensor:
        """A copy in a buffer of its own (`_cloned_value`), with a clone of self's gradient and self's
        is_param, as tinygrad 0.14: a clone made after backward() keeps the gradient computed so far."""
        out = self._cloned_value(device)
        if self.grad is not None:
            out.grad = self.grad._cloned_value(device)
        out.is_param = self.is_param
        return out

    def _cloned_value(self: Tensor, device: str | None = None) -> Tensor:
        """A copy in a buffer of its own, as tinygrad: a fresh buffer assigned self's value (one kernel), so
        assigning to it, or to a view of it, writes that buffer and leaves self unchanged. A value with no
        device (an arange) gets a buffer on `device` or the default one; a clone onto another device is a
        COPY there, and one of a multi-device tensor a store on each of its devices."""
        from rulec.runtime.ir.ops import Ops
        from rulec.runtime.ir.uop import UOp

        from rulec.runtime import buffers
        from rulec.runtime.device import Device

        T = type(self)
        dev = Device.canonicalize(device) if device is not None else self.device
        # (several devices, or a symbolic size: no single plain buffer to make)
        plain = not isinstance(self.device, tuple) and all(isinstance(n, int) for n in self.shape)
        if self.device is None and not plain:
            return self.contiguous().to(dev) if device is not None else self.contiguous()
        # a unique id each: two clones of one tensor are two buffers, not one shared node
        if isinstance(self.device, tuple) and dev == self.device:  # a store on each device of the multi
            return T(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), buffers.unique_id()))
        if not plain or (self.device is not None and dev != self.device):
            return T(UOp(Ops.COPY, self.dtype, (self.uop, UOp(Ops.DEVICE, arg=dev)), buffers.unique_id()))
        return T.empty(*self.shape, dtype=self.dtype, device=dev).assign(self)

    def shrink_to(self: Tensor, shape: Any, *args: Any) -> Tensor:
        """Keep the first `shape[i]` of each axis (None keeps an axis)."""
        new = tensor_args.int_tuple(shape, args, "shape", allow_none=True)
        if len(new) != self.ndim:
            raise ValueError(f"shrink_to {new} needs {self.ndim} sizes for shape {self.shape}")
        return self.shrink(tuple(None if s is None else (0, s) for s in new))

    def pad_to(self: Tensor, shape: Any, *args: Any, value: Any = 0) -> Tensor:
        """Pad at the end of each axis to `shape` (None keeps an axis)."""
        new = tensor_args.int_tuple(shape, args, "shape", allow_none=True)
        if len(new) != self.ndim or any(s is not None and s < c for s, c in zip(new, self.shape)):
            raise ValueError(f"cannot pad_to {new} from shape {self.shape}")
        return self.pad(tuple((0, 0 if s is None else s - c) for s, c in zip(new, self.shape)), value=value)

    @classmethod
    def einsum(cls, formula: str, *operands: Any, dtype: Any = None) -> Tensor:
        """Einstein summation ("ij,jk->ik"; implicit output: the letters used once, sorted; a letter twice in
        one operand takes its diagonal; "..." stands for the same leading axes in every operand). Built as
        one broadcast product and one sum over the letters not in the output."""
        ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
        ops = [_as_tensor(cls, o) for o in ops]
        ins, out = _einsum_letters(formula, ops)
        prepared = [_einsum_diagonals(o, s) for s, o in zip(ins, ops)]
        sizes = _einsum_sizes(formula, prepared)
        if any(c not in sizes for c in out):
            raise ValueError(f"einsum {formula!r}: output letters must appear in the inputs")
        every = list(out) + sorted(c for c in sizes if c not in out)
        dt = _to_dtype(dtype)
        prod_ = None
        for o, s in prepared:
            order = sorted(range(len(s)), key=lambda k: every.index(s[k]))
            o = o.permute(order).reshape(tuple(o.shape[s.index(c)] if c in s else 1 for c in every))
            o = o.cast(dt) if dt is not None else o
            prod_ = o if prod_ is None else prod_ * o
        assert prod_ is not None
        prod_ = prod_.expand(tuple(sizes[c] for c in every))
        summed = tuple(range(len(out), len(every)))
        return prod_.sum(summed, dtype=dt) if summed else prod_


_ELLIPSIS_LETTERS = [chr(c) for c in range(0x100, 0x140)]  # letters no formula uses, for "..." axes


def _einsum_letters(formula: str, ops: list) -> tuple[list[str], str]:
    """The letters of each operand and of the output, with "..." spelled out."""
    lhs, arrow, rhs = formula.replace(" ", "").partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ops):
        raise tensor_args.BadArgError(f"einsum {formula!r} names {len(ins)} operands, got {len(ops)}")
    ell = _ellipsis_len(lhs, ops)
    ins = [_expand_ellipsis(s, o.ndim, formula, total=ell) for s, o in zip(ins, ops)]
    for s, o in zip(ins, ops):
        if len(s) != o.ndim:
            raise ValueError(f"einsum {formula!r}: operand {s!r} does not match shape {o.shape}")
    if arrow:
        return ins, _expand_ellipsis(rhs, None, formula, ell_len=ell)
    letters = "".join(ins)
    once = sorted(c for c in set(letters) if letters.count(c) == 1 and c in string.ascii_letters)
    return ins, "".join(_ELLIPSIS_LETTERS[:ell]) + "".join(once)


def _einsum_sizes(formula: str, prepared: list) -> dict[str, int]:
    """The size of each letter; a size of 1 broadcasts (numpy's rule)."""
    sizes: dict[str, int] = {}
    for o, s in prepared:
        for c, n in zip(s, o.shape):
            old = sizes.setdefault(c, n)
            if old != n and 1 not in (old, n):
                raise tensor_args.BadArgError(f"einsum {formula!r}: letter {c!r} has sizes {old} and {n}")
            sizes[c] = max(old, n)
    return sizes


def _ellipsis_len(lhs: str, ops: list) -> int:
    return max((o.ndim - (len(s) - 3) for s, o in zip(lhs.split(","), ops) if "..." in s), default=0)


def _expand_ellipsis(s: str, ndim: int | None, formula: str, ell_len: int | None = None, total: int = 0) -> str:
    """`s` with "..." spelled out; an operand with fewer "..." axes than the longest (`total`) takes the
    last letters, so the axes broadcast right-aligned as numpy's."""
    if "..." not in s:
        if any(c not in string.ascii_letters for c in s):
            raise ValueError(f"einsum {formula!r}: only letters and '...' are allowed")
        return s
    k = (ndim - (len(s) - 3)) if ell_len is None else ell_len
    if k < 0:
        raise tensor_args.BadArgError(f"einsum {formula!r}: too many letters for an operand of {ndim} axes")
    first = max(total - k, 0) if ell_len is None else 0
    return s.replace("...", "".join(_ELLIPSIS_LETTERS[first:first + k]))


def _einsum_diagonals(o: Tensor, s: str) -> tuple[Tensor, str]:
    """An operand whose letters repeat ("ii") keeps only its diagonal: multiply by an identity mask and sum
    the second copy away."""
    T = type(o)
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        a, b = s.index(c), s.index(c, s.index(c) + 1)
        n = o.shape[a]
        if o.shape[b] != n:
            raise ValueError(f"einsum: repeated letter {c!r} has sizes {n} and {o.shape[b]}")
        eye = T.eye(n, dtype="bool").reshape(tuple(n if i in (a, b) else 1 for i in range(o.ndim)))
        o = eye.where(o, 0).sum(b).cast(o.dtype)
        s = s[:b] + s[b + 1:]
    return o, s
