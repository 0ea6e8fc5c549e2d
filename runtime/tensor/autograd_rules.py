"""Callbacks of rules/gradient.yaml: what the rule language cannot say (a node's device)."""
from __future__ import annotations

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import device_of
from rulec.runtime.ir.uop import UOp


def copy_back(x: UOp, up: UOp) -> UOp:
    """The gradient of a COPY of `x`: the upstream gradient copied back to `x`'s device."""
    return UOp(Ops.COPY, up.dtype, (up, UOp(Ops.DEVICE, arg=device_of(x))))
