"""Building multi-device values: `MULTI(MSTACK(part per device), (axis, devices))` and its parts.

What a node's layout is (its devices and shard axis) is runtime/ir/placement.py; this module builds the
nodes that the frontend (sharding), autograd and the scheduler's lowering (rules/schedule/multi.yaml)
put in graphs.
"""
from __future__ import annotations

from typing import Any

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.placement import Layout, MultiDeviceError, devices_of, layout, movement_axis, part_arg  # noqa: F401
from rulec.runtime.ir.uop import UOp


def parts(m: UOp) -> tuple[UOp, ...]:
    """The per-device parts of a MULTI node."""
    return m.src[0].src


def device_slice(s: UOp, d: int, n: int, axis: int | None) -> UOp:
    """Device d's part of a whole value `s` (replicated, or on one device) for a result sharded on `axis`
    over n devices: the d-th of n slices of that axis; all of `s` when it is broadcast along it (size 1)."""
    if axis is None or s.shape is None or s.shape[axis] == 1:
        return s
    step = s.shape[axis] // n
    return UOp(Ops.SHRINK, s.dtype, (s,), tuple((d * step, (d + 1) * step) if i == axis else (0, size)
                                                 for i, size in enumerate(s.shape)))


def multi(new_parts: list[UOp] | tuple[UOp, ...], lay: Layout, tag: Any = None) -> UOp:
    """The multi-device value with these parts (one per device of `lay`)."""
    stack = UOp(Ops.MSTACK, new_parts[0].dtype, tuple(new_parts))
    return UOp(Ops.MULTI, new_parts[0].dtype, (stack,), (lay.axis, lay.devices), tag)


def laid_out(u: UOp, lay: Layout) -> UOp:
    """`u` laid out as `lay`: itself when it is; else each device gets its slice, taken from its own copy
    of a replicated value, or from the value on one device (gathered first when sharded otherwise),
    copied to it."""
    got = layout(u)
    if got == lay:
        return u
    n = len(lay.devices)
    if got is not None and got.axis is None and got.devices == lay.devices:
        whole = [UOp(Ops.MSELECT, u.dtype, (u,), d) for d in range(n)]
    else:
        if got is not None:
            u = UOp(Ops.COPY, u.dtype, (u, UOp(Ops.DEVICE, arg=lay.devices[0])))
        whole = [u] * n
    out = []
    for d, (w, dev) in enumerate(zip(whole, lay.devices)):
        p = device_slice(w, d, n, lay.axis)
        on = devices_of(p)
        out.append(p if not on or on == {dev} else UOp(Ops.COPY, p.dtype, (p, UOp(Ops.DEVICE, arg=dev))))
    return multi(out, lay)
