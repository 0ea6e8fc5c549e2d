"""Stage `split kernels`: every closed STORE becomes a KERNEL; buffers become DEFINE_GLOBALs.

The state of one kernel (buffer numbering, range renumbering, bound variables)
lives in KernelContext; the kernel's own rewrite runs the `kernel_globals` and
`kernel_codegen` rule sets from rules/schedule/kernel.yaml.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Generator

from rulec.runtime.ir.dtype import AddrSpace
from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.ir.uop import UOp, op_mask
from rulec.runtime.ir.walk import run_recursive
from rulec.runtime.engine.matchers import current


@dataclass(frozen=True)
class Kernel:
    """The arg of a KERNEL node: its AST (a SINK of STOREs)."""

    ast: UOp

    def __repr__(self) -> str:
        return f"Kernel({len(self.ast.toposort())} nodes)"


@dataclass
class KernelContext:
    next_global: int = 0
    buffers: dict[UOp, UOp] = field(default_factory=dict)  # BUFFER -> what the kernel depends on
    numbers: dict[UOp, int] = field(default_factory=dict)  # BUFFER -> DEFINE_GLOBAL number
    bound_vars: dict[UOp, None] = field(default_factory=dict)
    next_range: int = 0

    def sources(self) -> tuple[UOp, ...]:
        order = sorted(self.buffers, key=lambda b: self.numbers[b])
        return tuple(self.buffers[b] for b in order) + tuple(self.bound_vars)


def as_buf(u: UOp) -> UOp:
    """The BUFFER under stores, indexes, assigns and movement ops."""
    while u.op is not Ops.BUFFER:
        if u.op in (Ops.STORE, Ops.INDEX, Ops.ASSIGN, Ops.MSELECT, Ops.MSTACK) or u.op in GroupOp.Movement:
            u = u.src[0]
        else:
            raise RuntimeError(f"no buffer under {u.op.name}")
    return u


# ------------------------------------------------------------------ kernel_globals callbacks


def define_global(ctx: KernelContext, buf: UOp) -> UOp:
    n = ctx.numbers.setdefault(buf, ctx.next_global)
    if n == ctx.next_global:
        ctx.next_global += 1
    ctx.buffers.setdefault(buf, buf)
    return UOp(Ops.DEFINE_GLOBAL, buf.dtype.ptr(buf.arg), (), n)


def unbind_variable(ctx: KernelContext, b: UOp) -> UOp:
    ctx.bound_vars[b] = None
    return b.src[0]


def depend_on_assign(ctx: KernelContext, a: UOp) -> UOp:
    # a kernel that reads an assigned buffer must run after that assign
    buf = as_buf(a)
    ctx.buffers[buf] = a
    return buf


def renumber_range(ctx: KernelContext, r: UOp) -> UOp | None:
    # numbering from 0 in every kernel makes equal kernels equal ASTs
    if r.tag is not None:
        return None
    out = r.replace(arg=(ctx.next_range, *r.arg[1:]), tag=())
    ctx.next_range += 1
    return out


# ------------------------------------------------------------------ split_kernels callback


def _refuse_old_and_new_reads(x: UOp) -> None:
    """A kernel can't read a buffer both as it was (the BUFFER) and as an assign wrote it (the ASSIGN):
    both would be one DEFINE_GLOBAL, and the old contents are gone. tinygrad calls this a cycle."""
    from rulec.runtime.schedule.callbacks.assign import AssignCycleError

    value = UOp.sink(*x.src[1:])
    if not value.has_op(_ASSIGN):
        return
    near = value.toposort(gate=lambda u: u.op is not Ops.ASSIGN)
    versions: dict[UOp, UOp] = {}  # two assigns to one buffer: the later one overwrote the earlier's
    for a in near:
        if a.op is Ops.ASSIGN and versions.setdefault(b := as_buf(a), a) is not a:
            raise AssignCycleError(
                f"cycle in the kernel graph: one kernel reads a {b.arg}-element {b.dtype.name} buffer as two "
                f"assigns to it wrote it; realize the value that reads the earlier one "
                f"(.contiguous().realize()) before the later assign")
    old = {u for u in near if u.op is Ops.BUFFER}
    if not old:
        return
    new: set[UOp] = set()
    for a in near:
        if a.op is Ops.ASSIGN:
            new |= _assigned_at_or_below(a)
    if both := old & new:
        b = next(iter(both))
        raise AssignCycleError(
            f"cycle in the kernel graph: one kernel reads a {b.arg}-element {b.dtype.name} buffer both before "
            f"and after an assign to it; realize the value that reads the old contents "
            f"(.contiguous().realize()) before the assign")


_ASSIGN = op_mask(Ops.ASSIGN)
# per ASSIGN, the buffers assigned at or below it: kept per node, so checking each kernel of a chain of
# kernels (each reads the ASSIGN of the one before) does not walk every kernel before it again
_ASSIGNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _assigned_at_or_below(a: UOp) -> frozenset[UOp]:
    def walk(u: UOp) -> Generator[UOp, frozenset[UOp], frozenset[UOp]]:  # `yield v` is walk(v)
        acc = {as_buf(u.src[0])}
        for v in UOp.sink(*u.src).toposort(gate=lambda n: n.op is not Ops.ASSIGN):
            if v.op is Ops.ASSIGN:
                acc |= (yield v)
        return frozenset(acc)

    return run_recursive(walk, a, _ASSIGNED)


def _kernel_rules():
    """`kernel_globals` then `kernel_codegen`, from the running pipeline's matchers: split_store is declared
    without a context (rules/schedule/kernel.yaml), so it reads them for the run (runtime/engine/matchers.py)."""
    return current().composed("kernel_globals", "kernel_codegen")


def split_store(x: UOp) -> UOp | None:
    if x.ranges:
        return None  # still inside a loop nest of an outer kernel
    if x.src[0].dtype.addrspace is AddrSpace.LOCAL:
        return None
    _refuse_old_and_new_reads(x)
    kctx = KernelContext()
    body = graph_rewrite(x, _kernel_rules(), ctx=kctx, bottom_up=True, name="kernel split")
    ast = body if body.src[1].op is Ops.COPY else UOp.sink(body)
    kernel = UOp(Ops.KERNEL, src=kctx.sources(), arg=Kernel(ast))
    buf = as_buf(x)
    return UOp(Ops.ASSIGN, buf.dtype, (buf, kernel))
