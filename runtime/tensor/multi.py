"""Tensors on several devices (issue 11 §5): `Tensor.shard`, sharded ops, the all-reduce, autograd.

A `MultiTensor` is one logical tensor kept as one plain `Tensor` per device (its shards): split along
`axis` (shard d holds the d-th of n equal slices) or, with `axis` None, replicated (every shard holds the
whole value). Every op on it is an op per device: the shards' graphs are ordinary single-device graphs,
scheduled together, so each device runs its own kernels and a move between devices is a COPY item.

This is a frontend lowering, not a scheduler stage: the tensor-level IR has no node for a multi-device
value (its shape, its autograd and its realization would all need one; docs/multi-device.md). What the
lowering decides, per op:

* elementwise ops between tensors sharded the same way, or between sharded and replicated ones (the
  replicated one is sliced to each device's part), stay sharded: one kernel per device;
* movement ops keep the shard axis whole (a reshape may move it where the split stays contiguous);
* a reduction over the shard axis reduces each shard, then every device adds up the partial results
  copied from the others, in device order (the all-reduce: copies and adds); other reductions stay
  sharded;
* anything else raises `MultiDeviceError` naming the op, the shapes and the axis.

Autograd: a replicated value used on several devices is a sum of its copies, so its gradient is the sum
(an all-reduce) of the shards' gradients; a sharded value's gradient is sharded the same way.
"""
from __future__ import annotations

import functools
import sys
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from rulec.runtime.device import canonical
from rulec.runtime.ir.dtype import DType
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import prod
from rulec.runtime.tensor.live import all_tensors
from rulec.runtime.tensor.tensor import Tensor, _broadcast_shape, _norm_axis, own_buffer

__all__ = ["MultiDeviceError", "MultiTensor", "flatten", "shard", "shard_"]


class MultiDeviceError(ValueError):
    """An op that has no per-device form on a multi-device tensor (as sharded), or mixed devices."""


# live multi-device tensors: backward() gives each the gradient of its shards
_live: weakref.WeakSet[MultiTensor] = weakref.WeakSet()


def _devices_arg(devices: Any) -> tuple[str, ...]:
    if isinstance(devices, str) or not isinstance(devices, (tuple, list)) or not devices:
        raise TypeError(f"devices must be a non-empty tuple of device names, got {devices!r}")
    devs = tuple(canonical(d) for d in devices)
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices {tuple(devices)} name a device twice ({devs})")
    return devs


def shard(t: Tensor, devices: Sequence[str], axis: int | None = None) -> MultiTensor:
    """`t` split along `axis` over `devices` (each gets a copy of its part), or replicated (axis None)."""
    devs = _devices_arg(devices)
    if isinstance(t, MultiTensor):
        t = t.to(devs[0])
    if axis is None:
        parts = [t] * len(devs)
    else:
        axis = _norm_axis(axis, t.ndim, t.shape)
        size = t.shape[axis]
        if not isinstance(size, int) or size % len(devs):
            raise ValueError(f"cannot shard shape {t.shape} on axis {axis} over {len(devs)} devices: "
                             f"{size} is not a multiple of {len(devs)}")
        step = size // len(devs)
        parts = [t.shrink(tuple((d * step, (d + 1) * step) if i == axis else None for i in range(t.ndim)))
                 for d in range(len(devs))]
    # each shard is storage of its own (a COPY, or a buffer on the same device), never the source itself:
    # assigning to a shard leaves the source alone, and the source's gradient is not the shard's
    shards = [own_buffer(p) if p.device == dev else p.to(dev) for p, dev in zip(parts, devs)]
    return MultiTensor(shards, axis)


def shard_(t: Tensor, devices: Sequence[str], axis: int | None = None) -> MultiTensor:
    """`t` itself becomes the sharded tensor (tinygrad's in-place `shard_`): same object, new class."""
    m = shard(t, devices, axis)
    # the realizer rebinds live plain tensors' graphs; this one has none from now on. (WeakSet.discard
    # would compare tensors with ==, which builds a graph: drop the stored reference itself)
    for r in [r for r in all_tensors.data if r() is t]:
        all_tensors.data.discard(r)
    t.__class__ = MultiTensor
    _SLOT.__set__(t, _Layout(m.shards, m.axis))
    _live.add(t)  # type: ignore[arg-type]
    return t  # type: ignore[return-value]


def flatten(tensors: Sequence[Tensor]) -> list[Tensor]:
    """Plain tensors for realize/schedule: a multi-device tensor is its shards."""
    out: list[Tensor] = []
    for t in tensors:
        out.extend(t.shards if isinstance(t, MultiTensor) else [t])
    return out


class _Layout:
    __slots__ = ("shards", "axis")

    def __init__(self, shards: Sequence[Tensor], axis: int | None):
        self.shards, self.axis = list(shards), axis


# a multi-device tensor keeps its layout in Tensor's own `uop` slot (shadowed by the property below), so
# that it has Tensor's memory layout and `shard_` can turn a Tensor into one in place
_SLOT: Any = Tensor.__dict__["uop"]


class MultiTensor(Tensor):
    """A logical tensor as one plain Tensor per device (see the module docstring)."""

    __slots__ = ()

    def __init__(self, shards: Sequence[Tensor], axis: int | None):  # noqa: D107 - not Tensor's signature
        self._init_autograd(None)
        _SLOT.__set__(self, _Layout(shards, axis))
        _live.add(self)

    @property
    def shards(self) -> list[Tensor]:
        """One plain Tensor per device, in device order."""
        return _SLOT.__get__(self, MultiTensor).shards

    @property
    def axis(self) -> int | None:
        """The axis the shards split (None: each shard is the whole value)."""
        return _SLOT.__get__(self, MultiTensor).axis

    # a multi-device tensor has no single graph: a Tensor method that reads one has no per-device form
    @property  # type: ignore[override]
    def uop(self) -> Any:
        caller = sys._getframe(1).f_code.co_name
        raise MultiDeviceError(f"{caller} is not supported on a multi-device tensor ({self._describe()}); "
                               f"gather it with .to(device) first")

    @uop.setter
    def uop(self, value: Any) -> None:
        raise MultiDeviceError(f"a multi-device tensor ({self._describe()}) has no single graph to set")

    def _describe(self) -> str:
        how = "replicated" if self.axis is None else f"sharded on axis {self.axis}"
        return f"shape {self.shape}, {how} over {self.device}"

    # ------------------------------------------------------------------ facts

    @property
    def shape(self) -> tuple[int, ...]:
        s = self.shards[0].shape
        if self.axis is None:
            return s
        return tuple(n * len(self.shards) if i == self.axis else n for i, n in enumerate(s))

    @property
    def dtype(self) -> DType:
        return self.shards[0].dtype

    @property
    def device(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self._devs())

    def _devs(self) -> list[str]:
        from rulec.runtime.device import Device

        return [s.device or Device.DEFAULT for s in self.shards]

    def __repr__(self) -> str:
        return f"<MultiTensor shape={self.shape} dtype={self.dtype.name} axis={self.axis} devices={self.device}>"

    # ------------------------------------------------------------------ moving

    def to(self, device: Any) -> Tensor:
        """On one device: the shards copied there and concatenated (a replicated one: one copy). On a
        tuple of devices: itself when they are its devices, else gathered and sharded again."""
        if isinstance(device, (tuple, list)):
            devs = _devices_arg(device)
            return self if devs == self.device else shard(self.to(devs[0]), devs, self.axis)
        dev = canonical(device) if device is not None else self._devs()[0]
        if self.axis is None:
            here = [s for s in self.shards if s.device == dev]
            return here[0] if here else self.shards[0].to(dev)
        moved = [s.to(dev) for s in self.shards]
        return moved[0].cat(*moved[1:], dim=self.axis)

    def to_(self, device: Any) -> Tensor:
        raise MultiDeviceError(f"to_ cannot turn a multi-device tensor ({self._describe()}) into another in place")

    def shard(self, devices: Sequence[str], axis: int | None = None) -> MultiTensor:
        return shard(self, devices, axis)

    def shard_(self, devices: Sequence[str], axis: int | None = None) -> MultiTensor:
        m = shard(self, devices, axis)
        _SLOT.__set__(self, _Layout(m.shards, m.axis))
        return self

    # ------------------------------------------------------------------ per-device ops

    def _each(self, fn: Callable[..., Tensor], *args: Any, axis: int | None | str = "same") -> MultiTensor:
        return MultiTensor([fn(s, *args) for s in self.shards], self.axis if axis == "same" else axis)

    def _unary(self, op: Ops) -> Tensor:
        return self._each(Tensor._unary, op)

    def cast(self, dtype: DType | str) -> Tensor:
        return self._each(Tensor.cast, dtype)

    def contiguous(self) -> Tensor:
        return self._each(Tensor.contiguous)

    def detach(self) -> Tensor:
        return self._each(Tensor.detach)

    def zeros_like(self, dtype: DType | str | None = None) -> Tensor:
        return self._each(lambda s: Tensor.zeros(s.shape, dtype=dtype or s.dtype, device=s.device))

    def ones_like(self, dtype: DType | str | None = None) -> Tensor:
        return self._each(lambda s: Tensor.ones(s.shape, dtype=dtype or s.dtype, device=s.device))

    def full_like(self, fill_value: Any, dtype: DType | str | None = None) -> Tensor:
        return self._each(lambda s: Tensor.full(s.shape, fill_value, dtype=dtype or s.dtype, device=s.device))

    def _binary(self, op: Ops, other: Any, reverse: bool = False, float_only: bool = False) -> Tensor:
        return _elementwise("_binary", lambda a, b: Tensor._binary(a, op, b, reverse, float_only), (self, other))

    def _compare(self, op: Ops, other: Any, reverse: bool = False) -> Tensor:
        return _elementwise("_compare", lambda a, b: Tensor._compare(a, op, b, reverse), (self, other))

    def where(self, x: Any, y: Any) -> Tensor:
        return _elementwise("where", Tensor.where, (self, x, y))

    def assign(self, x: Any) -> Tensor:
        if not isinstance(x, MultiTensor):
            x = (x if isinstance(x, Tensor) else Tensor(x, dtype=self.dtype)).shard(self.device, self.axis) \
                if not isinstance(x, (bool, int, float)) else self.full_like(x)
        if x.shape != self.shape:
            raise ValueError(f"cannot assign a tensor of shape {x.shape} to one of shape {self.shape}")
        for dst, src in zip(self.shards, _aligned(self, x, "assign")):
            dst.assign(src)
        return self

    def _mop(self, op: Ops, arg: Any) -> Tensor:
        shard_arg, axis = _movement(op, arg, self)
        return self._each(Tensor._mop, op, shard_arg, axis=axis)

    def _reduce(self, op: Ops, axis: Any, keepdim: bool) -> Tensor:
        axes = self._axes(axis)
        if self.axis is None or self.axis not in axes:
            new_axis = self.axis if self.axis is None or keepdim else self.axis - sum(a < self.axis for a in axes)
            return self._each(Tensor._reduce, op, axes, keepdim, axis=new_axis)
        partial = [Tensor._reduce(s, op, axes, True) for s in self.shards]
        total = MultiTensor(_allreduce(partial, op), None)
        return total if keepdim else total.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

    # ------------------------------------------------------------------ realization

    def realize(self, *lst: Tensor) -> Tensor:
        Tensor.realize(*flatten((self, *lst)))
        return self

    def schedule(self, *lst: Tensor) -> Any:
        return Tensor.schedule(*flatten((self, *lst)))

    def numpy(self) -> np.ndarray:
        self.realize()
        return self._gather_host(Tensor.numpy)

    def lazy_numpy(self) -> np.ndarray:
        return self._gather_host(Tensor.lazy_numpy)

    def _gather_host(self, read: Callable[[Tensor], np.ndarray]) -> np.ndarray:
        if self.axis is None:
            return read(self.shards[0])
        return np.concatenate([read(s) for s in self.shards], axis=self.axis)

    # ------------------------------------------------------------------ autograd

    def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
        root = self._root(gradient)
        plain = flatten(targets)
        got = dict(zip(map(id, plain), root.gradient(*plain))) if plain else {}
        return [_combine(t, [got[id(s)] for s in t.shards]) if isinstance(t, MultiTensor) else got[id(t)]
                for t in targets]

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """Accumulate the gradient into every live tensor self depends on, as Tensor.backward; a
        multi-device tensor gets the gradients of its shards, combined (module docstring)."""
        root = self._root(gradient)
        nodes = set(root.uop.toposort())
        owners: dict[int, list[tuple[MultiTensor, int]]] = {}
        frozen: set[int] = set()  # shards of multi-device tensors that asked for no gradient
        for m in list(_live):
            for i, s in enumerate(m.shards):
                if m.requires_grad is False:
                    frozen.add(id(s))
                elif m.dtype.is_float:
                    owners.setdefault(id(s), []).append((m, i))
        need = [t for t in list(all_tensors) if t.uop in nodes and t.dtype.is_float and t.device is not None
                and (id(t) in owners or (t.requires_grad is not False and id(t) not in frozen))]
        grads = root.gradient(*need) if need else []
        per_multi: dict[int, tuple[MultiTensor, dict[int, Tensor]]] = {}
        for t, g in zip(need, grads):
            if id(t) not in owners:
                t.grad = g if t.grad is None else t.grad + g
            for m, i in owners.get(id(t), []):
                per_multi.setdefault(id(m), (m, {}))[1][i] = g
        for m, got in per_multi.values():
            g = _combine(m, [got.get(i) for i in range(len(m.shards))])
            m.grad = g if m.grad is None else m.grad + g
        return self

    def _root(self, gradient: Tensor | None) -> Tensor:
        """One plain scalar graph whose gradients are self's (with `gradient`: the sum of self * gradient)."""
        if gradient is None:
            if self.shape != ():
                raise ValueError(f"backward() without a gradient needs a scalar, but the shape is {self.shape}")
            return self.shards[0]
        g = gradient if isinstance(gradient, MultiTensor) else shard(gradient, self.device, self.axis)
        if g.shape != self.shape:
            raise ValueError(f"gradient of shape {g.shape} for a tensor of shape {self.shape}")
        terms = [(s * p.cast(s.dtype)).sum() for s, p in zip(self.shards, _aligned(self, g, "backward"))]
        if self.axis is None:
            return terms[0]
        dev = self._devs()[0]
        return functools.reduce(Tensor.add, [t.to(dev) for t in terms])


# -------------------------------------------------------------------------------- helpers


def _combine(m: MultiTensor, grads: list[Tensor | None]) -> MultiTensor:
    """A multi-device tensor's gradient from its shards' (None: zeros): replicated ones are summed."""
    full = [g if g is not None else Tensor.zeros(s.shape, dtype=s.dtype, device=s.device)
            for s, g in zip(m.shards, grads)]
    return MultiTensor(full if m.axis is not None else _allreduce(full, Ops.ADD), m.axis)


_COMBINE: dict[Ops, Callable[[Tensor, Tensor], Tensor]] = {
    Ops.ADD: Tensor.add, Ops.MUL: Tensor.mul, Ops.MAX: Tensor.maximum}


def _allreduce(parts: list[Tensor], op: Ops) -> list[Tensor]:
    """Each device's combination of every part, copied to it: the same order on every device, so the
    replicas are equal to the bit."""
    devs = [p.device for p in parts]
    return [functools.reduce(_COMBINE[op], [p.to(d) for p in parts]) for d in devs]


def _movement(op: Ops, arg: Any, m: MultiTensor) -> tuple[Any, int | None]:
    """The argument of a movement op on each shard, and the shard axis after it."""
    a, shape, n = m.axis, m.shape, len(m.shards)
    if a is None:
        return arg, None

    def refuse(why: str) -> MultiDeviceError:
        return MultiDeviceError(f"{op.name} {arg} of a tensor of shape {shape} sharded on axis {a} over {n} "
                                f"devices: {why}")

    if op is Ops.RESHAPE:
        before = prod(shape[:a])
        for j in range(len(arg)):
            if prod(arg[:j]) == before and isinstance(arg[j], int) and arg[j] % n == 0 and arg[j] >= n:
                return tuple(s // n if i == j else s for i, s in enumerate(arg)), j
        raise refuse("the shards would not be contiguous parts of one axis of the new shape")
    if op is Ops.EXPAND:
        return tuple(s // n if i == a else s for i, s in enumerate(arg)), a
    if op is Ops.PERMUTE:
        return arg, tuple(arg).index(a)
    if op is Ops.PAD:
        if tuple(arg[a]) != (0, 0):
            raise refuse("padding the shard axis")
        return arg, a
    if op is Ops.SHRINK:
        if tuple(arg[a]) != (0, shape[a]):
            raise refuse("shrinking the shard axis")
        return tuple((0, shape[a] // n) if i == a else b for i, b in enumerate(arg)), a
    if op is Ops.FLIP:
        if arg[a]:
            raise refuse("flipping the shard axis")
        return arg, a
    raise refuse("no per-device form")


def _aligned(ref: MultiTensor, x: MultiTensor, what: str) -> list[Tensor]:
    """x's shards laid out as ref's: the same devices, a replicated x sliced to ref's parts."""
    args, axis = _per_device(what, (ref, x))
    if axis != ref.axis:
        raise MultiDeviceError(f"{what}: a tensor sharded on axis {x.axis} does not fit one sharded on axis "
                               f"{ref.axis} (shapes {x.shape} and {ref.shape})")
    return [a[1] for a in args]


def _elementwise(name: str, fn: Callable[..., Tensor], items: tuple) -> MultiTensor:
    args, axis = _per_device(name, items)
    return MultiTensor([fn(*a) for a in args], axis)


def _per_device(name: str, items: tuple) -> tuple[list[list[Any]], int | None]:
    """The operands of an elementwise op for each device, and the shard axis of its result.

    Tensors sharded on the same (broadcast-aligned) axis give their shards; replicated ones and plain
    tensors without a device give the whole value, sliced to each device's part of the shard axis;
    Python scalars pass as they are."""
    multis = [x for x in items if isinstance(x, MultiTensor)]
    devs = multis[0].device
    shapes = [x.shape for x in items if isinstance(x, Tensor)]
    for x in items:
        if isinstance(x, MultiTensor) and x.device != devs:
            raise MultiDeviceError(f"{name}: tensors on different devices ({devs} and {x.device}, shapes "
                                   f"{', '.join(map(str, shapes))}): shard them onto the same devices")
        if isinstance(x, Tensor) and not isinstance(x, MultiTensor) and x.device is not None:
            raise MultiDeviceError(f"{name}: a tensor on {x.device} (shape {x.shape}) with a multi-device "
                                   f"tensor on {devs}: shard it with .shard(devices) first")
    out = _broadcast_shape(*shapes)
    axes = {m.axis + len(out) - m.ndim for m in multis if m.axis is not None}
    if len(axes) > 1:
        raise MultiDeviceError(f"{name}: operands of shapes {', '.join(map(str, shapes))} are sharded on "
                               f"different axes ({', '.join(str(m.axis) for m in multis)})")
    axis = axes.pop() if axes else None
    n = len(devs)
    per = [[_part(x, d, n, axis, len(out)) for x in items] for d in range(n)]
    return per, axis


def _part(x: Any, d: int, n: int, axis: int | None, ndim: int) -> Any:
    """Operand `x` on device `d` of `n`, the result sharded on `axis` (of `ndim` axes)."""
    if not isinstance(x, Tensor):
        return x
    if isinstance(x, MultiTensor):
        if x.axis is not None:
            return x.shards[d]
        x = x.shards[d]
    k = None if axis is None else axis - (ndim - x.ndim)
    if k is None or k < 0 or x.shape[k] == 1:
        return x  # broadcast along the shard axis: every device reads all of it
    step = x.shape[k] // n
    return x.shrink(tuple((d * step, (d + 1) * step) if i == k else None for i in range(x.ndim)))
