"""Stage `remove costly buffers`, and collecting the buffers that leave the scheduler."""
from __future__ import annotations

from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp


def collect_outputs(sink: UOp) -> UOp:
    """A new SINK of every tagged BUFFERIZE, constant and view of a buffer: what the tensors turn into.

    A tagged view of a buffer is an output that needs no kernel: a tensor equal to
    (a view of) a buffer that exists, once a buffer read back at its own index was removed.
    A tagged MULTI is a multi-device tensor: its parts are those of its devices.
    """
    keep = [x for x in sink.parents
            if x.tag is not None and (x.op in (Ops.BUFFERIZE, Ops.MULTI) or x.base.op in (Ops.CONST, Ops.BUFFER))]
    return UOp.sink(*keep)
