"""Stage `assign ordering`: a kernel that reads a buffer runs before a later assign overwrites it."""
from __future__ import annotations

from ..ops import Ops
from ..uop import UOp


def order_assigns(s: UOp) -> UOp | None:
    """Make each earlier assign of a buffer a kernel reads depend on that kernel's assign.

    Runs on the SINK; adding a dependency that is already there is a no-op, so a
    second visit returns None and the rewrite reaches its fixed point.
    """
    sink = s
    last: dict[UOp, UOp] = {}
    extra: dict[UOp, UOp] = {}
    for u in sink.toposort():
        if u.op is not Ops.ASSIGN or len(u.src) < 2 or u.src[1].op is not Ops.KERNEL:
            continue
        buf = u.src[0]
        last[buf] = u
        for read in u.src[1].src:
            if read.op is not Ops.BUFFER or read is buf:
                continue
            prior = last.get(read)
            if prior is None:
                continue
            if any(x.op is Ops.ASSIGN and x.src[0] is read for x in u.toposort()):
                raise RuntimeError(f"cycle in the kernel graph: the kernel writing {buf.arg}-element buffer "
                                   f"both reads and depends on an assign of another buffer")
            if u in prior.src:
                continue
            extra[prior] = last[read] = prior.replace(src=prior.src + (u,))
    return sink.substitute(extra) if extra else None
