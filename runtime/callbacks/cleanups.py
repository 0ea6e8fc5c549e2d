"""Stage `remove costly buffers`, and collecting the buffers that leave the scheduler."""
from __future__ import annotations

from ..ops import Ops
from ..uop import UOp


def collect_outputs(sink: UOp) -> UOp:
    """A new SINK of every tagged BUFFERIZE (and tagged constant): what the tensors turn into."""
    keep = [x for x in sink.parents if x.tag is not None and (x.op is Ops.BUFFERIZE or x.base.op is Ops.CONST)]
    return UOp.sink(*keep)
