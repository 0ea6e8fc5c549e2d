"""Tensors on several devices (issue 11 §5): `Tensor.shard`, and what a multi-device tensor answers.

A multi-device tensor is a plain Tensor whose graph is MULTI(MSTACK(part per device), (axis, devices))
(runtime/ir/placement.py; runtime/ir/multi.py builds it): split along `axis` (part d is the d-th of n
equal slices) or, with `axis` None, replicated. Ops on it build the logical graph, with logical shapes, like any other; each new node's
layout is checked as it is built, so an op with no per-device form fails at once. Autograd
differentiates the logical graph (rules/gradient.yaml has MULTI's rule), and the scheduler's first stage
(rules/schedule/multi.yaml) turns it into one graph per device: one kernel per device for an elementwise
op, an all-reduce for a reduction over the shard axis, a gather for `.to(device)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rulec.runtime.device import canonical
from rulec.runtime.ir.multi import Layout, MultiDeviceError, laid_out, layout, multi
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import devices_of
from rulec.runtime.ir.uop import UOp

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

__all__ = ["MultiDeviceError", "devices_arg", "full", "shard", "shards", "to_devices"]


def devices_arg(devices: Any) -> tuple[str, ...]:
    if isinstance(devices, str) or not isinstance(devices, (tuple, list)) or not devices:
        raise TypeError(f"devices must be a non-empty tuple of device names, got {devices!r}")
    devs = tuple(canonical(d) for d in devices)
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices {tuple(devices)} name a device twice ({devs})")
    return devs


def shard(t: Tensor, devices: Sequence[str], axis: int | None = None) -> Tensor:
    """`t` split along `axis` over `devices` (each gets a copy of its part), or replicated (axis None)."""
    from rulec.runtime.tensor.tensor import Tensor, _norm_axis, own_buffer

    devs = devices_arg(devices)
    if axis is not None:
        axis = _norm_axis(axis, t.ndim, t.shape)
        size = t.shape[axis]
        if not isinstance(size, int) or size % len(devs):
            raise ValueError(f"cannot shard shape {t.shape} on axis {axis} over {len(devs)} devices: "
                             f"{size} is not a multiple of {len(devs)}")
    m = laid_out(t.uop, Layout(devs, axis))
    if m is t.uop:
        return t
    # each part is storage of its own (a COPY, or a buffer on the same device), never the source itself:
    # assigning to the sharded tensor leaves the source alone
    own = [p if p.op is Ops.COPY or not devices_of(p) else own_buffer(Tensor(p)).uop for p in m.src[0].src]
    return Tensor(m.replace(src=(m.src[0].replace(src=tuple(own)),)))


def full(shape: tuple[int, ...], value: Any, dtype: Any, devices: Sequence[str], axis: int | None = None) -> Tensor:
    """A constant laid out on `devices` (split along `axis`, or replicated): each part a constant placed on
    its device, so contiguous() of it gives each device a buffer of its own."""
    from rulec.runtime.tensor.tensor import Tensor

    devs = devices_arg(devices)
    part = tuple(n // len(devs) if i == axis else n for i, n in enumerate(shape))
    return Tensor(multi([Tensor.full(part, value, dtype, device=d).uop for d in devs], Layout(devs, axis)))


def to_devices(t: Tensor, devices: Sequence[str]) -> Tensor:
    """`t` on a tuple of devices: itself when it is laid out there, else replicated (a sharded tensor keeps
    its axis)."""
    devs = devices_arg(devices)
    lay = layout(t.uop)
    if lay is not None and lay.devices == devs:
        return t
    return shard(t, devs, lay.axis if lay is not None else None)


def shards(t: Tensor) -> list[Tensor]:
    """One Tensor per device, in device order: each device's part (the tensor itself on one device)."""
    from rulec.runtime.tensor.tensor import Tensor

    lay = layout(t.uop)
    if lay is None:
        return [t]
    return [Tensor(UOp(Ops.MSELECT, t.dtype, (t.uop,), d)) for d in range(len(lay.devices))]


def like(g: Tensor, t: Tensor) -> Tensor:
    """`g` laid out as `t` (a gradient gets its tensor's devices and axis)."""
    from rulec.runtime.tensor.tensor import Tensor

    lay = layout(t.uop)
    return g if lay is None else Tensor(laid_out(g.uop, lay))
