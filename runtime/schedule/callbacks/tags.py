"""Stage `number the uops`: tag every tensor-level node with its position in a list.

The tags ride along through every later stage, so the scheduler can tell which
original tensor each buffer ends up holding.
"""
from __future__ import annotations

from rulec.runtime.ir.uop import UOp


def tag_uop(ctx: list[UOp], x: UOp) -> UOp | None:
    if x.tag is not None:
        return None
    ctx.append(x)
    return UOp(x.op, x.dtype, x.src, x.arg, (len(ctx) - 1,))  # as x.replace(tag=...), without its keywords
