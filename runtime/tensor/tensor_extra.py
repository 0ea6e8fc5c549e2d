"""Still more of the Tensor API, as tinygrad 0.14 has it (issue 11 §3): inverse trigonometric and
hyperbolic functions, bitwise ops, scans, shape helpers, random creation, and a few nn functions.

`ExtraOps` is a base class of `MoreOps` (runtime/tensor/tensor_more.py), so of `Tensor`; as there, its
methods are built from public Tensor methods only (no new IR op).

Conventions:
* functions of floats take integer tensors to float32 (tinygrad's result would be its weak float);
* scans (`cumprod`, `logcumsumexp`) are masked reductions over a triangular mask, like `cumsum`;
* `logcumsumexp` of a prefix that is all -inf is -inf (numpy's value; tinygrad 0.14 gives NaN there);
* random creation (`randperm`, `rand_like`, `multinomial`'s draws) uses the host generator like `rand`.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rulec.runtime.ir.ops import Ops
from rulec.runtime.device import canonical
from rulec.runtime.tensor import tensor_args

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

# acos(x) = sqrt(1 - x) * poly(x) on [0, 1], |error| <= 2e-8 (Abramowitz & Stegun 4.4.46)
_ACOS_POLY = (1.5707963050, -0.2145988016, 0.0889789874, -0.0501743046,
              0.0308918810, -0.0170881256, 0.0066700901, -0.0012624911)
# asin(x) = x * sum_n c_n x^(2n), c_n = (2n)! / (4^n (n!)^2 (2n + 1)); ten terms: < 1e-8 for |x| <= 0.5
_ASIN_SERIES = tuple(math.comb(2 * n, n) / (4 ** n * (2 * n + 1)) for n in range(10))
_SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_BITS_OF = {2: "int16", 4: "int32", 8: "int64"}


def free_const(T: type[Tensor], value: Any, dtype: Any, shape: tuple) -> Tensor:
    """`value` broadcast to `shape` on no device (a Python scalar's kind of constant): it takes the
    device of the tensors it meets, where `Tensor.full` would place it on the default device."""
    return T(value, dtype=dtype)._broadcast_to(tuple(shape))


def _dtypes() -> Any:
    from rulec.runtime.ir.dtype import dtypes

    return dtypes


def _to_dtype(dtype: Any) -> Any:
    return tensor_args.to_dtype(dtype)


def _check_ints(name: str, *xs: Tensor) -> None:
    """Bitwise ops take bool or integer tensors (shifts: integers only)."""
    for x in xs:
        if x.dtype.is_float or (name.endswith("shift") and x.dtype.kind == "bool"):
            kinds = "integer" if name.endswith("shift") else "bool or integer"
            raise tensor_args.DTypeArgError(f"{name} needs {kinds} tensors, got {x.dtype.name} of shape {x.shape}")


def _along_last(x: Tensor, axis: int) -> tuple[Tensor, int]:
    """x with `axis` moved last (undone by the same transpose), and that axis normalized."""
    ax = tensor_args.axis(axis, x.ndim, x.shape)
    return x.transpose(ax, -1), ax


def _lower_mask(T: type, n: int) -> Tensor:
    """[j, i] is True where i <= j: the running prefix of position j."""
    return T.arange(n).reshape(n, 1) >= T.arange(n).reshape(1, n)


class ExtraOps:
    __slots__ = ()

    # ------------------------------------------------------------------ trigonometric and hyperbolic

    def asin(self: Tensor) -> Tensor:
        """On |x| <= 0.5 the Taylor series (exact near 0), above it pi/2 - acos's polynomial; then the sign."""
        x = self._to_float()
        a = x.abs()
        a2 = a * a
        series = 0.0
        for c in reversed(_ASIN_SERIES):
            series = series * a2 + c
        poly = 0.0
        for c in reversed(_ACOS_POLY):
            poly = poly * a + c
        near_one = math.pi / 2 - (1 - a).sqrt() * poly  # NaN outside [-1, 1] through the sqrt
        return x.sign() * (a <= 0.5).where(a * series, near_one)

    def acos(self: Tensor) -> Tensor:
        return math.pi / 2 - self.asin()

    def atan(self: Tensor) -> Tensor:
        """atan(y) = asin(y / sqrt(1 + y^2)) for |y| <= 1; outside, +-pi/2 - atan(1/y) (so infinities work)."""
        x = self._to_float()
        big = x.abs() > 1
        y = big.where(1 / x, x)
        inner = (y / (1 + y * y).sqrt()).asin()
        return big.where(x.sign() * (math.pi / 2) - inner, inner)

    def sinh(self: Tensor) -> Tensor:
        x = self._to_float()
        return (x.exp() - (-x).exp()) * 0.5

    def cosh(self: Tensor) -> Tensor:
        x = self._to_float()
        return (x.exp() + (-x).exp()) * 0.5

    def asinh(self: Tensor) -> Tensor:
        # on |x|, then the sign: log(|x| + sqrt(x^2 + 1)) does not cancel
        x = self._to_float()
        a = x.abs()
        return x.sign() * (a + (a * a + 1).sqrt()).log()

    def acosh(self: Tensor) -> Tensor:
        x = self._to_float()
        return (x + (x * x - 1).sqrt()).log()

    def atanh(self: Tensor) -> Tensor:
        x = self._to_float()
        return 0.5 * ((1 + x) / (1 - x)).log()

    def log10(self: Tensor) -> Tensor:
        return self.log2() * math.log10(2)

    # ------------------------------------------------------------------ elementwise arithmetic

    def copysign(self: Tensor, other: Any) -> Tensor:
        """|self| with the sign of `other`; for floats the sign bit itself (-0.0 and NaN signs count)."""
        T = type(self)
        a, b = T._operands(self, other)
        if a.dtype.is_float:
            ints = _BITS_OF[a.dtype.itemsize]
            sign = -(1 << (8 * a.dtype.itemsize - 1))  # the sign bit, as a signed integer
            ai, bi = a.bitcast(ints), b.bitcast(ints)
            exact = ((ai & ~sign) | (bi & sign)).bitcast(a.dtype)
            # the same value through a negation where the sign bits differ, so the gradient flows to self
            # (+-1; 0 at a zero, as torch and tinygrad); a bitcast has none
            flip = ((ai ^ bi) & sign) != 0
            return (a == 0).where(exact, flip.where(-a, a))
        if a.dtype.kind == "bool":
            return a
        return (b < 0).where(-a.abs(), a.abs())

    def fmod(self: Tensor, x: Any) -> Tensor:
        """C's remainder: the sign of the dividend (Python's `%` takes the divisor's)."""
        T = type(self)
        a, b = T._operands(self, x)
        if a.dtype.is_float:
            return a - (a / b).trunc() * b
        if a.dtype.kind == "bool":
            raise TypeError(f"fmod needs integer or float tensors, not bool (shape {a.shape})")
        return a._int_op(Ops.MOD, b)

    def lerp(self: Tensor, end: Tensor, weight: Any) -> Tensor:
        """self + (end - self) * weight. uint8 with a weight tensor (image resizing) steps in fixed point
        as tinygrad: the weight rounded to 1/128ths, the product rounded, so results round, not truncate
        (the difference is kept in int16, where tinygrad's int8 would wrap past 127)."""
        T = type(self)
        if self.dtype.name == "uint8" and isinstance(weight, T):
            w = (weight * 128 + 0.5).cast("int16")
            step = ((T._operands(end, self)[0].cast("int16") - self.cast("int16")) * w + 64)._floor_div(128)
            return (self.cast("int16") + step).cast("uint8")
        return self + (end - self) * weight

    def quick_gelu(self: Tensor) -> Tensor:
        return self * (self * 1.702).sigmoid()

    def softmin(self: Tensor, axis: int = -1, dtype: Any = None) -> Tensor:
        return (-self).softmax(axis, dtype)

    # ------------------------------------------------------------------ bitwise

    def bitwise_and(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.AND, "bitwise_and", x, reverse)

    def bitwise_or(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.OR, "bitwise_or", x, reverse)

    def bitwise_xor(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.XOR, "bitwise_xor", x, reverse)

    def bitwise_not(self: Tensor) -> Tensor:
        _check_ints("bitwise_not", self)
        return self._invert()

    def lshift(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.SHL, "lshift", x, reverse)

    def rshift(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """Arithmetic for signed integers (the sign is kept), as numpy."""
        return self._bitwise(Ops.SHR, "rshift", x, reverse)

    def __lshift__(self: Tensor, x: Any) -> Tensor: return self.lshift(x)
    def __rshift__(self: Tensor, x: Any) -> Tensor: return self.rshift(x)
    def __rlshift__(self: Tensor, x: Any) -> Tensor: return self.lshift(x, reverse=True)
    def __rrshift__(self: Tensor, x: Any) -> Tensor: return self.rshift(x, reverse=True)

    def __ilshift__(self: Tensor, x: Any) -> Tensor: return self.assign(self.lshift(x))
    def __irshift__(self: Tensor, x: Any) -> Tensor: return self.assign(self.rshift(x))

    def _bitwise(self: Tensor, op: Ops, name: str, x: Any, reverse: bool) -> Tensor:
        T = type(self)
        a, b = T._operands(x, self) if reverse else T._operands(self, x)
        _check_ints(name, a, b)
        return a._int_op(op, b)

    # ------------------------------------------------------------------ comparisons

    def isclose(self: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """|self - other| <= atol + rtol * |other| (numpy's rule); equal infinities are close, NaN is close
        to NaN only with equal_nan."""
        T = type(self)
        a, b = T._operands(self, other)
        near = (a - b).abs() <= atol + rtol * b.abs()
        if a.dtype.is_float:  # an infinity is close only to itself (inf - inf is NaN, inf <= inf is true)
            near = near & a.isfinite() & b.isfinite()
        close = (a == b) | near
        return close | (a.isnan() & b.isnan()) if equal_nan else close

    def allclose(self: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """A 0-d bool tensor: every element isclose (as tinygrad, a Tensor: `.item()` for a Python bool)."""
        return self.isclose(other, rtol, atol, equal_nan).all()

    # ------------------------------------------------------------------ reductions and scans

    def cumprod(self: Tensor, axis: int) -> Tensor:
        """Running product along `axis`, in self's dtype: one product over a triangular mask."""
        if self.ndim == 0:
            tensor_args.axes(axis, 0, (), reduction=True)
            return self
        x, ax = _along_last(self, axis)
        n = x.shape[-1]
        out = _lower_mask(type(self), n).where(x.unsqueeze(-2), 1).prod(-1).cast(self.dtype)
        return out.transpose(ax, -1)

    def logcumsumexp(self: Tensor, axis: int = 0) -> Tensor:
        """log(cumsum(exp(x))) along `axis`, each prefix shifted by its own max (no underflow)."""
        x = self._to_float()
        if self.ndim == 0:
            tensor_args.axes(axis, 0, (), reduction=True)
            return x
        x, ax = _along_last(x, axis)
        n = x.shape[-1]
        out = _lower_mask(type(self), n).where(x.unsqueeze(-2), -math.inf).logsumexp(-1)
        return out.transpose(ax, -1)

    def var_mean(self: Tensor, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self: Tensor, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """(x - mean) * invstd * weight + bias, each of the four shaped as x's `axis` axes (in order) and
        broadcast over the others (tinygrad's `batchnorm`; `invstd` is 1 / sqrt(var + eps))."""
        axes = tuple(a % self.ndim for a in ((axis,) if isinstance(axis, int) else axis))
        want = tuple(self.shape[a] for a in axes)
        shape = tuple(self.shape[a] if a in axes else 1 for a in range(self.ndim))

        def spread(t: Tensor, name: str) -> Tensor:
            if tuple(t.shape) != want and t.numel() != math.prod(want):
                raise ValueError(f"batchnorm: {name} of shape {t.shape} does not fit the axes {axes} of {self.shape}")
            return t.reshape(shape)

        x = self - spread(mean, "mean")
        scale = spread(invstd, "invstd") if weight is None else spread(weight, "weight") * spread(invstd, "invstd")
        x = x * scale
        return x if bias is None else x + spread(bias, "bias")

    def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        """self / max(||self||_p along dim, eps), as torch.nn.functional.normalize."""
        x = self._to_float()
        if p == 2.0:
            norm = (x * x).sum(dim, keepdim=True).sqrt()
        elif p == 1.0:
            norm = x.abs().sum(dim, keepdim=True)
        else:
            norm = x.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
        return x / norm.maximum(eps)

    # ------------------------------------------------------------------ shape

    def diag(self: Tensor) -> Tensor:
        """The square matrix with self (1-d) on its diagonal."""
        if self.ndim != 1:
            raise ValueError(f"diag needs a 1-d tensor, got shape {self.shape}")
        n = self.shape[0]
        return type(self).eye(n, dtype="bool").where(self.reshape(1, n), 0).cast(self.dtype)

    def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of axes dim1 and dim2 (offset above it when > 0), as a new last axis (numpy's)."""
        offset = tensor_args.as_int(offset, "diagonal offset")
        a = tensor_args.axis(dim1, self.ndim, self.shape, "diagonal dim1")
        b = tensor_args.axis(dim2, self.ndim, self.shape, "diagonal dim2")
        if a == b:
            raise tensor_args.BadArgError(f"diagonal dim1 and dim2 must differ, got {dim1} and {dim2} for shape {self.shape}")
        rest = [i for i in range(self.ndim) if i not in (a, b)]
        x = self.permute(rest + [a, b])
        r, c = x.shape[-2:]
        r0, c0 = min(r, max(0, -offset)), min(c, max(0, offset))
        n = max(0, min(r - r0, c - c0))
        lead = tuple((0, s) for s in x.shape[:-2])
        x = x.shrink(lead + ((r0, r0 + n), (c0, c0 + n)))
        # the diagonal of an (n, n) block: flatten, one more per row, keep column 0
        x = x.reshape(x.shape[:-2] + (n * n,)).pad(((0, 0),) * len(lead) + ((0, n),))
        x = x.reshape(x.shape[:-1] + (n, n + 1))
        return x.shrink(lead + ((0, n), (0, 1))).reshape(x.shape[:-2] + (n,))

    def roll(self: Tensor, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor:
        """Shift elements along dims, wrapping around (torch.roll; dims=None rolls the flattened tensor)."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        sh = tensor_args.int_tuple(shifts, (), "roll shifts")
        ds = tensor_args.int_tuple(dims, (), "roll dims")
        if len(sh) != len(ds):
            raise tensor_args.BadArgError(f"roll needs one shift per dim, got shifts={shifts} and dims={dims}")
        x = self
        for s, d in zip(sh, ds):
            ax = tensor_args.axis(d, x.ndim, x.shape, "roll dims")
            n = x.shape[ax]
            if n == 0 or s % n == 0:
                continue
            k = s % n  # the last k elements come first: a window of two copies
            twice = x.repeat(tuple(2 if i == ax else 1 for i in range(x.ndim)))
            x = twice.shrink(tuple((n - k, 2 * n - k) if i == ax else None for i in range(x.ndim)))
        return x

    def unflatten(self: Tensor, dim: int, sizes: tuple[int, ...]) -> Tensor:
        d = tensor_args.axis(dim, self.ndim, self.shape, "unflatten dim")
        sizes = tensor_args.int_tuple(sizes, (), "unflatten sizes")
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def unfold(self: Tensor, dim: int, size: int, step: int) -> Tensor:
        """Windows of `size` every `step` along dim: that axis counts the windows, a new last axis holds
        them (torch.Tensor.unfold)."""
        d = tensor_args.axis(dim, max(self.ndim, 1), self.shape, "unfold dim")
        size, step = tensor_args.as_int(size, "unfold size"), tensor_args.as_int(step, "unfold step")
        x = self.reshape(1) if self.ndim == 0 else self
        if size < 0 or step < 1 or size > x.shape[d]:
            raise tensor_args.BadArgError(f"unfold size {size} / step {step} do not fit axis {dim} of shape {self.shape}")
        win = x.transpose(d, -1)._pool((size,), (step,))  # (..., windows, size)
        out = win.transpose(d, -2) if d != x.ndim - 1 else win
        return out.reshape(out.shape[1:]) if self.ndim == 0 else out

    def view(self: Tensor, shape: Any, *args: Any) -> Tensor:
        return self.reshape(shape, *args)

    def meshgrid(self: Tensor, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        """Grids of 1-d tensors ("ij": matrix indexing; "xy": the first two axes swapped, as numpy).
        A 0-d tensor counts as one element, as in torch."""
        if indexing not in ("ij", "xy"):
            raise tensor_args.BadArgError(f"meshgrid indexing must be 'ij' or 'xy', not {indexing!r}")
        ts = tuple(t.reshape(1) if t.ndim == 0 else t for t in (self, *args))
        if any(t.ndim != 1 for t in ts):
            raise ValueError(f"meshgrid takes 0-d or 1-d tensors, got shapes {[t.shape for t in (self, *args)]}")
        sizes = [t.shape[0] for t in ts]
        if indexing == "xy" and len(ts) > 1:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        out = []
        for i, t in enumerate(ts):
            at = (1 - i if i < 2 else i) if indexing == "xy" and len(ts) > 1 else i
            out.append(t.reshape(tuple(-1 if j == at else 1 for j in range(len(ts)))).expand(tuple(sizes)))
        return tuple(out)

    def rearrange(self: Tensor, formula: str, **sizes: int) -> Tensor:
        """einops-style "b c (h w) -> b h w c": names, parenthesized groups, "..." and 1 on either side;
        a group on the left is split (one size may be inferred, the others given as keywords)."""
        lhs, arrow, rhs = formula.partition("->")
        if not arrow:
            raise ValueError(f"rearrange formula {formula!r} needs '->'")
        left, right = _rearrange_groups(lhs, formula), _rearrange_groups(rhs, formula)
        ell = sum(g == ["..."] for g in left)
        if ell > 1 or sum(g == ["..."] for g in right) != ell:
            raise ValueError(f"rearrange {formula!r}: '...' must appear once on both sides or not at all")
        n_ell = self.ndim - (len(left) - ell)
        if n_ell < 0 or (not ell and len(left) != self.ndim):
            raise ValueError(f"rearrange {formula!r} names {len(left)} axes, the shape is {self.shape}")
        split, known, dim = [], dict(sizes), 0
        for g in left:
            if g == ["..."]:
                split += [f"...{i}" for i in range(n_ell)]
                known.update({f"...{i}": self.shape[dim + i] for i in range(n_ell)})
                dim += n_ell
                continue
            _rearrange_split(g, self.shape[dim], known, formula)
            split += g
            dim += 1
        names = [s for s in split if s != "1"]
        if len(set(names)) != len(names):
            raise ValueError(f"rearrange {formula!r}: a name appears twice on the left")
        out_names = [s for g in right for s in (([f"...{i}" for i in range(n_ell)]) if g == ["..."] else g) if s != "1"]
        if sorted(out_names) != sorted(names):
            raise ValueError(f"rearrange {formula!r}: the two sides must name the same axes")
        x = self.reshape(tuple(1 if s == "1" else known[s] for s in split))
        x = x.reshape(tuple(known[s] for s in names)).permute(tuple(names.index(s) for s in out_names))
        shape: list[int] = []
        for g in right:
            if g == ["..."]:
                shape += [known[f"...{i}"] for i in range(n_ell)]
            else:
                shape.append(math.prod(1 if s == "1" else known[s] for s in g))
        return x.reshape(tuple(shape))

    # ------------------------------------------------------------------ creation

    def empty_like(self: Tensor, dtype: Any = None, device: str | None = None) -> Tensor:
        return type(self).empty(*self.shape, dtype=_to_dtype(dtype) or self.dtype, device=device or self.device)

    def const_like(self: Tensor, b: Any, dtype: Any = None) -> Tensor:
        """A constant of self's shape (and dtype, unless given) on no device, as tinygrad 0.14's: it joins
        the device of what it is combined with, so a graph of aranges and constants stays virtual."""
        dt = _to_dtype(dtype) or self.dtype
        if isinstance(self.device, tuple):  # laid out on the devices as self
            return self.full_like(b, dtype=dt)
        return free_const(type(self), b, dt, self.shape)

    def rand_like(self: Tensor, **kwargs: Any) -> Tensor:
        dt = _to_dtype(kwargs.pop("dtype", None)) or self.dtype
        if not dt.is_float:
            raise ValueError(f"rand_like needs a float dtype, got {dt.name} (pass dtype=...)")
        return self._random_like(type(self).rand, dt, kwargs)

    def randn_like(self: Tensor, dtype: Any = None, **kwargs: Any) -> Tensor:
        dt = _to_dtype(dtype) or self.dtype
        return self._random_like(type(self).randn, None, kwargs).cast(dt)

    def _random_like(self: Tensor, draw: Any, dt: Any, kwargs: dict) -> Tensor:
        """Random values of self's shape on self's device; on a multi-device tensor, laid out as it is (drawn
        whole on the host, then sharded on self's axis)."""
        device = kwargs.pop("device", None)
        if not isinstance(self.device, tuple):
            return draw(*self.shape, dtype=dt, device=device or self.device, **kwargs)
        if device is not None and (not isinstance(device, tuple) or tuple(canonical(d) for d in device) != self.device):
            raise ValueError(f"a random tensor like one on {self.device} cannot be put on {device}: "
                             "draw it there, or shard the result")
        return draw(*self.shape, dtype=dt, **kwargs).shard(self.device, self.axis)

    @classmethod
    def randperm(cls, n: int, device: str | None = None, dtype: Any = "int32", **kwargs: Any) -> Tensor:
        """A random permutation of 0..n-1, drawn on the host like `rand` (seed= as rand's)."""
        from rulec.runtime import buffers

        n = tensor_args.as_int(n, "randperm n")
        if n < 0:
            raise ValueError(f"randperm n must be >= 0, got {n}")
        dt = _to_dtype(dtype)
        perm = cls._rng(kwargs.pop("seed", None)).permutation(n)
        if kwargs:
            raise TypeError(f"randperm got unexpected arguments {sorted(kwargs)}")
        return cls(np.asarray(perm).astype(buffers.numpy_dtype(dt)), device, dtype=dt)

    @classmethod
    def kaiming_normal(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Normal with std gain / sqrt(fan_in), gain = sqrt(2 / (1 + a^2)), fan_in = prod(shape[1:])."""
        s = tensor_args.new_shape(shape)
        std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(int(np.prod(s[1:])))
        return cls.normal(*s, mean=0.0, std=std, **kwargs)

    def multinomial(self: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Draw class indices (int32) with probabilities proportional to self (1-d, or 2-d: one row per
        draw set). With replacement: the count of cdf steps below a uniform draw; without: the largest
        keys log(u) / p (a weighted sample without replacement)."""
        T = type(self)
        if self.ndim not in (1, 2):
            raise ValueError(f"multinomial needs a 1-d or 2-d tensor, got shape {self.shape}")
        k = tensor_args.as_int(num_samples, "multinomial num_samples")
        n = self.shape[-1]
        if k < 1 or (not replacement and k > n):
            raise ValueError(f"multinomial cannot draw {k} samples from {n} classes (replacement={replacement})")
        w = (self.reshape(1, n) if self.ndim == 1 else self)._to_float()
        b = w.shape[0]
        if replacement:
            cdf = w.cumsum(1) / w.sum(1, keepdim=True)  # (b, n)
            u = T.rand(b, k, 1)
            out = (u >= cdf.reshape(b, 1, n)).sum(-1).minimum(n - 1)
        else:
            keys = T.rand(b, n).log() / w  # a zero weight gives -inf: never drawn before the others
            out = keys.topk(k, -1)[1]
        out = out.cast(_dtypes().int32)
        return out.reshape(k) if self.ndim == 1 else out

    # ------------------------------------------------------------------ facts and casts

    def size(self: Tensor, dim: int | None = None) -> Any:
        """The shape, or the size of axis `dim` (torch's `size`)."""
        if dim is None:
            return self.shape
        return self.shape[tensor_args.axis(dim, self.ndim, self.shape, "size dim")]

    def element_size(self: Tensor) -> int:
        return self.dtype.itemsize

    def nbytes(self: Tensor) -> int:
        return self.numel() * self.dtype.itemsize

    def is_floating_point(self: Tensor) -> bool:
        return self.dtype.is_float

    def short(self: Tensor) -> Tensor:
        return self.cast(_dtypes().int16)

    def bfloat16(self: Tensor) -> Tensor:
        return self.cast(_dtypes().bfloat16)

    # ------------------------------------------------------------------ indexing by masks

    def masked_select(self: Tensor, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """The elements of self where `mask` (broadcast to self) is True, flattened. With size=None the
        length is the number of Trues (read back: a realization); with `size`, it is padded with
        fill_value or cut."""
        T = type(self)
        if not isinstance(mask, T) or mask.dtype.kind != "bool":
            raise TypeError(f"masked_select needs a bool mask tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")
        x, m = self.flatten(), mask._broadcast_to(self.shape).flatten()
        rank = m.cumsum()  # the k-th True has rank k + 1
        if size is None:
            size = int(rank[-1].item()) if m.numel() else 0
        size = tensor_args.as_int(size, "masked_select size")
        if size < 0:
            raise ValueError(f"masked_select size must be >= 0, got {size}")
        hit = m.reshape(1, -1) & (rank.reshape(1, -1) == T.arange(1, size + 1).reshape(size, 1))  # (size, n)
        picked = hit.where(x.reshape(1, -1), 0).sum(-1).cast(self.dtype)
        return hit.any(-1).where(picked, fill_value).cast(self.dtype)

    def nonzero(self: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """(count, ndim) int32 indices of the non-zero elements in row-major order (numpy's argwhere);
        size=None reads the count back (a realization), `size` pads with fill_value or cuts."""
        T = type(self)
        if self.ndim == 0:
            n = int((self != 0).item()) if size is None else tensor_args.as_int(size, "nonzero size")
            return T.zeros(n, 0, dtype="int32")
        coords = [T.arange(s).reshape(tuple(s if j == i else 1 for j in range(self.ndim))).expand(self.shape)
                  for i, s in enumerate(self.shape)]
        idx = coords[0].stack(*coords[1:], dim=-1) if len(coords) > 1 else coords[0].unsqueeze(-1)
        m = (self != 0).unsqueeze(-1)._broadcast_to(idx.shape)
        total = None if size is None else tensor_args.as_int(size, "nonzero size") * self.ndim
        return idx.cast(_dtypes().int32).masked_select(m, total, fill_value).reshape(-1, self.ndim)

    def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                       include_self: bool = True) -> Tensor:
        """self with src reduced into the places index names along dim (torch.scatter_reduce): "sum",
        "prod", "mean", "amax" or "amin"; include_self=False leaves self's value out where something is
        written. An integer mean rounds toward -inf (torch)."""

        T = type(self)
        if reduce not in _SCATTER_REDUCES:
            raise tensor_args.BadArgError(f"scatter_reduce reduce must be one of {_SCATTER_REDUCES}, not {reduce!r}")
        index = tensor_args.int_index(T, index, "scatter_reduce index")
        d = tensor_args.axis(dim, self.ndim, self.shape, "scatter_reduce dim")
        if index.ndim != self.ndim or any(a > b for i, (a, b) in enumerate(zip(index.shape, self.shape)) if i != d):
            raise tensor_args.BadArgError(f"scatter_reduce: index {index.shape} does not fit self {self.shape} on dim {dim}")
        if not isinstance(src, T) or src.ndim != index.ndim or any(a < b for a, b in zip(src.shape, index.shape)):
            raise tensor_args.BadArgError(f"scatter_reduce: src {getattr(src, 'shape', src)} is smaller than index {index.shape}")
        src = src.shrink(tuple((0, s) for s in index.shape)).cast(self.dtype)
        n = self.shape[d]
        hit = tensor_args.one_hot_along((index < 0).where(index + n, index), n, d + 1)  # (.., m, n, ..)
        vals = src.unsqueeze(d + 1)
        grow = tuple((0, 0) if i == d else (0, s - t) for i, (s, t) in enumerate(zip(self.shape, index.shape)))
        count = hit.sum(d).pad(grow)
        big = math.inf if self.dtype.is_float else self.dtype.max
        small = -math.inf if self.dtype.is_float else self.dtype.min
        if reduce in ("sum", "mean"):
            red = hit.where(vals, 0).sum(d).cast(self.dtype).pad(grow)
            new = red + self if include_self else red
        elif reduce == "prod":
            red = hit.where(vals, 1).prod(d).cast(self.dtype).pad(grow, value=1)
            new = red * self if include_self else red
        else:
            fill = small if reduce == "amax" else big
            red = hit.where(vals, fill)
            red = (red.max(d) if reduce == "amax" else red.min(d)).pad(grow, value=fill)
            new = (red.maximum(self) if reduce == "amax" else red.minimum(self)) if include_self else red
        if reduce == "mean":
            cnt = count + 1 if include_self else count.maximum(1)
            new = new / cnt if self.dtype.is_float else new._floor_div(cnt.cast(self.dtype))
        # the reduces are padded (past the index's extent) with their identity, so with include_self an
        # unwritten place reduces nothing into self (0, 1, an extreme, a count of 1)
        if include_self:
            return new.cast(self.dtype)
        return (count > 0).where(new.cast(self.dtype), self)

    # ------------------------------------------------------------------ nn functions

    def max_unpool2d(self: Tensor, indices: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1,
                     padding: Any = 0, output_size: Any = None) -> Tensor:
        """The inverse of max_pool2d(return_indices=True): each value goes to the flat position its index
        names in the output's last len(kernel_size) axes; the rest is 0. Without output_size, the size
        is torch's (i - 1) * stride - padding + dilation * (k - 1) + 1 per axis."""

        T = type(self)
        nd = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
        ks = tensor_args.tuple_of(kernel_size, nd, "max_unpool2d kernel_size")
        st = ks if stride is None else tensor_args.tuple_of(stride, nd, "max_unpool2d stride")
        dl = tensor_args.tuple_of(dilation, nd, "max_unpool2d dilation")
        pads = tensor_args.pool_pads(padding, nd, "max_unpool2d")
        indices = tensor_args.int_index(T, indices, "max_unpool2d indices")
        if indices.shape != self.shape or self.ndim < nd:
            raise ValueError(f"max_unpool2d: indices {indices.shape} must match self {self.shape} (>= {nd} axes)")
        ins = self.shape[-nd:]
        if output_size is None:
            outs = tuple((i - 1) * s - (p0 + p1) + d * (k - 1) + 1
                         for i, s, (p0, p1), d, k in zip(ins, st, pads, dl, ks))
        else:
            outs = tuple(tensor_args.int_tuple(output_size, (), "max_unpool2d output_size"))[-nd:]
        lead = self.shape[:-nd]
        m, total = int(np.prod(ins)), int(np.prod(outs))
        x, idx = self.reshape(lead + (m, 1)), indices.reshape(lead + (m, 1))
        hit = idx == T.arange(total).reshape((1,) * len(lead) + (1, total))  # (..., m, total)
        # overlapping windows name one input element several times, always with its one value: a max
        low = -math.inf if self.dtype.is_float else self.dtype.min
        out = hit.any(-2).where(hit.where(x, low).max(-2), 0).cast(self.dtype)
        return out.reshape(lead + outs)

    def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
                         dilation: Any = 1, padding: Any = 0, output_padding: Any = 0) -> Tensor:
        """The transposed convolution (the gradient of conv2d with respect to its input), weight of shape
        (in, out // groups, *kernel), over 1, 2 or more spatial axes as conv2d: the input spread out by
        `stride` (zeros between), padded by dilation*(k-1)-padding, convolved with the flipped, transposed
        weight."""
        x, nd = self, weight.ndim - 2
        if nd < 1 or x.ndim != weight.ndim:
            raise tensor_args.WindowShapeError(f"conv_transpose2d needs an input and weight of the same rank >= 3, "
                                               f"got {x.shape} and {weight.shape}")
        n, cin, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
        cin_w, cout_g, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
        if cin != cin_w or cin % groups:
            raise tensor_args.WindowShapeError(f"conv_transpose2d: input {x.shape} does not match weight {weight.shape} "
                                               f"with groups={groups}")
        strides, dils = tensor_args.per_axis(stride, nd, "stride"), tensor_args.per_axis(dilation, nd, "dilation")
        pads, opads = tensor_args.per_axis(padding, nd, "padding"), tensor_args.per_axis(output_padding, nd, "output_padding")
        if any(s > 1 for s in strides):  # zeros between the input's elements: (h, 1) padded to (h, s), flattened, the tail cut
            x = x.reshape((n, cin) + tuple(v for h in sizes for v in (h, 1)))
            x = x.pad(((0, 0), (0, 0)) + tuple(p for s in strides for p in ((0, 0), (0, s - 1))))
            x = x.reshape((n, cin) + tuple(h * s for h, s in zip(sizes, strides)))
            x = x.shrink(((0, n), (0, cin)) + tuple((0, (h - 1) * s + 1) for h, s in zip(sizes, strides)))
        sp = tuple(range(3, 3 + nd))
        wt = weight.reshape((groups, cin // groups, cout_g) + kernel).permute((0, 2, 1) + sp).flip(sp)
        wt = wt.reshape((groups * cout_g, cin // groups) + kernel)
        lows = tuple(d * (k - 1) - p for d, k, p in zip(dils, kernel, pads))
        if min(lows) < 0:
            raise ValueError(f"conv_transpose2d: padding {padding} is larger than dilation*(kernel-1)")
        x = x.pad(((0, 0), (0, 0)) + tuple((lo, lo + op) for lo, op in zip(lows, opads)))
        return x.conv2d(wt, bias, groups, 1, dils, 0)


def _rearrange_groups(side: str, formula: str) -> list[list[str]]:
    """The axes of one side: each a list of names ("(h w)" is ["h", "w"]; "()" is [])."""
    tokens = re.findall(r"\(|\)|\.\.\.|[A-Za-z_][A-Za-z0-9_]*|\d+|\S", side)
    groups: list[list[str]] = []
    group: list[str] | None = None
    for t in tokens:
        if t == "(":
            if group is not None:
                raise ValueError(f"rearrange {formula!r}: nested parentheses")
            group = []
        elif t == ")":
            if group is None:
                raise ValueError(f"rearrange {formula!r}: unbalanced parentheses")
            groups.append(group)
            group = None
        elif t == "..." or t == "1" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t):
            if group is not None:
                group.append(t)
            else:
                groups.append([t])
        else:
            raise ValueError(f"rearrange {formula!r}: unexpected {t!r}")
    if group is not None:
        raise ValueError(f"rearrange {formula!r}: unbalanced parentheses")
    return groups


def _rearrange_split(group: Sequence[str], size: int, known: dict[str, int], formula: str) -> None:
    """Record the sizes of a left group of axis `size`: at most one unknown, inferred."""
    unknown = [s for s in group if s != "1" and s not in known]
    have = math.prod(1 if s == "1" else known[s] for s in group if s == "1" or s in known)
    if len(unknown) > 1:
        raise ValueError(f"rearrange {formula!r}: cannot infer both of {unknown} (give one as a keyword)")
    if unknown:
        if have == 0 or size % have:
            raise ValueError(f"rearrange {formula!r}: axis of size {size} does not split into {group}")
        known[unknown[0]] = size // have
    elif have != size:
        raise ValueError(f"rearrange {formula!r}: {group} has size {have}, the axis has {size}")
