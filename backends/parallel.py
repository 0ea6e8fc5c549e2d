"""Which loop of a CPU kernel runs on several cores: a backend with a `parallel` template (C: an OpenMP
pragma) puts it before that loop.

The loop is the kernel's outermost, and only when splitting its iterations among threads cannot change a
result: it is an output loop (never a reduction's), every store to memory is inside it and writes at an
index that reads it (so two iterations never write one element), and the scheduler guarantees that a kernel
never reads a buffer it writes at another index. Each output is still computed by one thread, in the same
order: results are bitwise the same. The registers declared before the loop (accumulators) become private
to each thread. A kernel of little work keeps one thread: starting the others costs more than it saves.
"""
from __future__ import annotations

from dataclasses import dataclass

from rulec.runtime.codegen.helpers import kind_of
from rulec.runtime.codegen.lower import LoweredKernel
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

# innermost iterations (the product of every loop's size) below which a kernel runs on one thread
MIN_PARALLEL_WORK = 1 << 18


@dataclass(frozen=True)
class ParallelLoop:
    loop: UOp  # the RANGE whose "open" step gets the pragma
    private: tuple[UOp, ...]  # DEFINE_REGs declared before it


def parallel_loop(k: LoweredKernel) -> ParallelLoop | None:
    """The loop of `k` to split among threads, or None (see the module docstring)."""
    opens = [i for i, s in enumerate(k.steps) if s.kind == "open"]
    if not opens:
        return None
    first = opens[0]
    loop = k.steps[first].uop
    if kind_of(loop) == "reduce" or _size(loop) < 2:
        return None
    close = _closing(k, first)
    inside = range(first + 1, close)
    for i, s in enumerate(k.steps):
        if s.kind == "open" and i > close:
            return None  # a second loop nest after this one
        if s.kind == "op" and s.uop.op is Ops.STORE and s.uop.src[0].op is Ops.INDEX:
            if i not in inside or loop not in s.uop.src[0].toposort():
                return None
    work = 1
    for s in k.steps:
        if s.kind == "open":
            work *= _size(s.uop)
    if work < MIN_PARALLEL_WORK:
        return None
    private = tuple(s.uop for s in k.steps[:first] if s.kind == "op" and s.uop.op is Ops.DEFINE_REG)
    return ParallelLoop(loop, private)


def _size(r: UOp) -> int:
    n = r.src[0]
    return int(n.arg) if n.op is Ops.CONST else int(n.vmax)


def _closing(k: LoweredKernel, opened: int) -> int:
    """The index of the "close" step that ends the loop opened at step `opened`."""
    depth = 0
    for i in range(opened, len(k.steps)):
        kind = k.steps[i].kind
        depth += 1 if kind == "open" else -1 if kind == "close" else 0
        if depth == 0:
            return i
    return len(k.steps)
