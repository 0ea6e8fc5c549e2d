"""Where a tensor-level value lives: its devices, and for a value on several devices, its layout.

A tensor on several devices is `MULTI(MSTACK(part_0, ..., part_n-1), arg=(axis, devices))`: part d is
the value on `devices[d]`, either the d-th of n equal slices of `axis`, or (axis None) the whole value.
Tensor ops build the logical graph on top of MULTI nodes, with logical shapes; the scheduler's first
stage (rules/schedule/multi.yaml) turns it into one graph per device. `layout(u)` is the fact both read.
The frontend computes it as each node is built, so an op with no per-device form fails at once, with the
op, the shapes and the axis named. Both facts are cached per node and computed from the sources' (a new
node costs O(1); a graph is walked once).

This module reads nodes and builds none (runtime/ir/multi.py builds them): shape inference imports it.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X

if TYPE_CHECKING:
    from rulec.runtime.ir.uop import UOp

MULTI_MASK = 1 << Ops.MULTI  # UOp._mask: the ops at or below a node
# ops that read their first source elementwise and keep its layout
_SAME_LAYOUT = frozenset({Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.FUSE, Ops.NOOP})


# ------------------------------------------------------------------ devices

_devices: weakref.WeakKeyDictionary[UOp, frozenset[str]] = weakref.WeakKeyDictionary()


def devices_of(u: UOp) -> frozenset[str]:
    """The devices a tensor-level graph lives on: those of its buffers and placed constants, and the target of
    a COPY (whose source is another device's business). Empty for a graph with no device."""
    if (d := _devices.get(u)) is not None:
        return d
    for x in u.toposort(gate=lambda n: n not in _devices):
        if x in _devices:
            continue
        if x.op is Ops.COPY and len(x.src) > 1 and x.src[1].op is Ops.DEVICE:
            d = frozenset((x.src[1].arg,))
        elif x.op is Ops.MULTI:
            d = frozenset(x.arg[1])
        elif x.op is Ops.MSELECT:
            d = frozenset((_part_device(x),))
        elif (x.op is Ops.BUFFER and len(x.src) > 1 and x.src[1].op is Ops.DEVICE) or \
                (x.op is Ops.CONST and x.src and x.src[0].op is Ops.DEVICE):
            d = frozenset((x.src[-1].arg,))
        else:
            d = frozenset().union(*(_devices[s] for s in x.src)) if x.src else frozenset()
        _devices[x] = d
    return _devices[u]


def device_of(u: UOp, default: str = "CPU") -> str:
    """The one device `u` lives on (`default` when it has none)."""
    found = devices_of(u)
    if len(found) > 1:
        raise ValueError(f"a graph mixes the devices {sorted(found)}: copy with .to() first")
    return next(iter(found)) if found else default


def part_shape(m: UOp) -> tuple | None:
    """The shape of MSELECT(x, d), device d's part of x: 1/n of x's shard axis."""
    whole, lay = m.src[0].shape, layout(m.src[0])
    if whole is None or lay is None or lay.axis is None:
        return whole
    return tuple(s // len(lay.devices) if i == lay.axis else s for i, s in enumerate(whole))


def _part_device(m: UOp) -> str:
    lay = layout(m.src[0])
    if lay is None:
        raise MultiDeviceError(f"MSELECT {m.arg} of a value on one device")
    return lay.devices[m.arg]


# ------------------------------------------------------------------ layouts

class MultiDeviceError(ValueError):
    """An op that has no per-device form on a multi-device tensor, or operands on different devices."""


@dataclass(frozen=True)
class Layout:
    devices: tuple[str, ...]
    axis: int | None  # None: every device holds the whole value

    def describe(self, shape: tuple) -> str:
        how = "replicated" if self.axis is None else f"sharded on axis {self.axis}"
        return f"shape {tuple(shape)}, {how} over {self.devices}"


_layouts: weakref.WeakKeyDictionary[UOp, Layout | None] = weakref.WeakKeyDictionary()


def layout(u: UOp) -> Layout | None:
    """The layout of a logical node with a MULTI below it; None for a graph on one device (or none)."""
    if not u._mask & MULTI_MASK:
        return None
    if u in _layouts:
        return _layouts[u]
    for x in u.toposort(gate=lambda n: bool(n._mask & MULTI_MASK) and n not in _layouts):
        if x._mask & MULTI_MASK and x not in _layouts:
            _layouts[x] = _infer(x)
    return _layouts[u]


def _infer(x: UOp) -> Layout | None:
    op = x.op
    if op is Ops.MULTI:
        axis, devices = x.arg
        return Layout(tuple(devices), axis)
    if op in (Ops.MSELECT, Ops.MSTACK, Ops.COPY, Ops.SINK):
        return None  # one device's part, the parts themselves, a gather to one device
    if op in GroupOp.Elementwise or op in _SAME_LAYOUT:
        return _combined(op.name, x.src if op in GroupOp.Elementwise else x.src[:1])
    if op is Ops.ASSIGN:
        return _assigned(x)
    src = layout(x.src[0])
    if src is None:
        return None
    if op in GroupOp.Movement:
        return Layout(src.devices, movement_axis(x, src))
    if op is Ops.REDUCE_AXIS:
        # a reduction over the shard axis leaves every device the whole (all-reduced) result
        return Layout(src.devices, None if src.axis in x.arg[1] else src.axis)
    raise MultiDeviceError(f"{op.name} is not supported on a multi-device tensor "
                           f"({src.describe(x.src[0].shape)}); gather it with .to(device) first")


def _combined(name: str, srcs: tuple[UOp, ...], reshard: bool = True) -> Layout | None:
    """The layout of an elementwise op: its operands' common devices and shard axis (the frontend has
    broadcast them to one shape). An operand with no device fits any layout; one on a device does not.
    Operands sharded on different axes give the last operand's axis, as tinygrad 0.14: the others are
    resharded to it (gathered, then sliced); not for an assign (`reshard=False`)."""
    lays = [(s, layout(s)) for s in srcs]
    multis = [(s, lay) for s, lay in lays if lay is not None]
    if not multis:
        return None  # one device's parts (MSELECT) below, not a multi-device value
    devs = multis[0][1].devices
    shapes = ", ".join(str(tuple(s.shape)) for s in srcs if s.shape is not None)
    for s, lay in lays:
        if lay is None and devices_of(s):
            raise MultiDeviceError(f"{name}: a tensor on {', '.join(sorted(devices_of(s)))} (shape {tuple(s.shape)}) "
                                   f"with a multi-device tensor on {devs}: shard it with .shard(devices) first")
        if lay is not None and lay.devices != devs:
            raise MultiDeviceError(f"{name}: tensors on different devices ({devs} and {lay.devices}, shapes "
                                   f"{shapes}): shard them onto the same devices")
    axes = list(dict.fromkeys(lay.axis for _, lay in multis if lay.axis is not None))
    if len(axes) > 1 and not reshard:
        raise MultiDeviceError(f"{name}: operands of shapes {shapes} are sharded on different axes "
                               f"({', '.join(map(str, sorted(axes)))})")
    return Layout(devs, axes[-1] if axes else None)


def _assigned(a: UOp) -> Layout | None:
    target = layout(a.src[0])
    got = _combined("assign", a.src[:2], reshard=False)
    if got is None:
        return None
    if target is None:
        raise MultiDeviceError(f"assign: a multi-device value ({got.describe(a.src[1].shape)}) to a tensor "
                               f"on {', '.join(sorted(devices_of(a.src[0]))) or 'no device'}")
    if got.axis != target.axis:
        raise MultiDeviceError(f"assign: a tensor sharded on axis {got.axis} does not fit one sharded on axis "
                               f"{target.axis} (shapes {tuple(a.src[1].shape)} and {tuple(a.src[0].shape)})")
    return target


def movement_axis(x: UOp, src: Layout) -> int | None:
    """The shard axis after movement op `x` of a value laid out as `src`; raises where the parts would not
    stay equal slices of one axis."""
    a = src.axis
    if a is None:
        return None
    op, arg, shape, n = x.op, x.arg, tuple(x.src[0].shape), len(src.devices)

    def refuse(why: str) -> MultiDeviceError:
        return MultiDeviceError(f"{op.name} {arg} of a tensor of shape {shape} sharded on axis {a} over {n} "
                                f"devices: {why}")

    if op is Ops.RESHAPE:
        before = math.prod(shape[:a])
        for j in range(len(arg)):
            if math.prod(arg[:j]) == before and isinstance(arg[j], int) and arg[j] % n == 0 and arg[j] >= n:
                return j
        raise refuse("the shards would not be contiguous parts of one axis of the new shape")
    if op is Ops.PERMUTE:
        return tuple(arg).index(a)
    if op is Ops.EXPAND:
        return a
    if op is Ops.SHRINK and tuple(arg[a]) != (0, shape[a]):
        # a part of the shard axis: each device gathers the pieces it needs (rules/schedule/multi.yaml)
        if not all(isinstance(b, int) for b in arg[a]):
            raise refuse("shrinking the shard axis by a symbolic amount")
        return None
    whole = {Ops.PAD: lambda: tuple(arg[a]) == (0, 0), Ops.SHRINK: lambda: tuple(arg[a]) == (0, shape[a]),
             Ops.FLIP: lambda: not arg[a]}
    if not whole[op]():
        raise refuse(f"{_VERB[op]} the shard axis")
    return a


_VERB = {Ops.PAD: "padding", Ops.SHRINK: "shrinking", Ops.FLIP: "flipping"}


def part_arg(x: UOp, src: Layout) -> Any:
    """The argument of movement op `x` on each device's part (the shard axis holds 1/n of its size)."""
    a, n = src.axis, len(src.devices)
    if a is None:
        return x.arg
    if x.op is Ops.RESHAPE:
        j = movement_axis(x, src)
        return tuple(s // n if i == j else s for i, s in enumerate(x.arg))
    if x.op is Ops.EXPAND:
        return tuple(s // n if i == a else s for i, s in enumerate(x.arg))
    if x.op is Ops.SHRINK:
        return tuple((0, b[1] // n) if i == a else b for i, b in enumerate(x.arg))
    return x.arg
