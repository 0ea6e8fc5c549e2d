"""Callbacks of rules/gradient.yaml: what the rule language cannot say (a node's device and layout)."""
from __future__ import annotations

from rulec.runtime.ir.multi import laid_out, layout, multi, parts
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import device_of
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.helpers import const_shaped


def copy_back(x: UOp, up: UOp) -> UOp:
    """The gradient of a COPY of `x`: the upstream gradient copied back to `x`'s device (laid out as `x`
    when that is a multi-device value, which the copy gathered)."""
    lay = layout(x)
    if lay is not None:
        return laid_out(up, lay)
    return UOp(Ops.COPY, up.dtype, (up, UOp(Ops.DEVICE, arg=device_of(x))))


def multi_parts(f: UOp, up: UOp) -> UOp:
    """The gradient of a MULTI's parts, as an MSTACK: each device's slice of the upstream gradient. The
    parts of a replicated value are one logical value: part 0 takes the whole gradient, the others none."""
    lay = layout(f)
    g = laid_out(up, lay)
    each = parts(g) if g.op is Ops.MULTI else tuple(UOp(Ops.MSELECT, g.dtype, (g,), d) for d in range(len(lay.devices)))
    if lay.axis is None:
        each = (each[0],) + tuple(UOp(Ops.NOOP, g.dtype) for _ in each[1:])
    return UOp(Ops.MSTACK, g.dtype, each)


def select_back(f: UOp, up: UOp) -> UOp:
    """The gradient of a multi-device value from device i's part: `up` there, zeros on the other devices."""
    lay, zeros = layout(f.src[0]), const_shaped(up, 0.0)
    return multi([up if d == f.arg else zeros for d in range(len(lay.devices))], lay)
