"""Stage `number the uops`: tag every tensor-level node with its position in a list.

The tags ride along through every later stage, so the scheduler can tell which
original tensor each buffer ends up holding. Buffers, constants, devices and
variables are global and stay untagged. A whole-graph pass (a pipeline step): it
builds each node once, sources first.
"""
from __future__ import annotations

from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp

_GLOBAL = frozenset({Ops.BUFFER, Ops.CONST, Ops.DEVICE, Ops.UNIQUE, Ops.DEFINE_VAR, Ops.BIND})


def number_uops(sink: UOp, originals: list[UOp]) -> UOp:
    """`sink` with every untagged tensor-level node tagged (i,), where originals[i] is the node it was."""
    new: dict[UOp, UOp] = {}
    for x in sink.toposort():
        srcs = tuple(new[s] for s in x.src)
        if x.op in _GLOBAL or x.tag is not None:
            new[x] = x if srcs == x.src else x.replace(src=srcs)
        else:
            originals.append(x)
            new[x] = UOp(x.op, x.dtype, srcs, x.arg, (len(originals) - 1,))
    return new[sink]
