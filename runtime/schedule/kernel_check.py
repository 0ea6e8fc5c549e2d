"""A structural safety check of kernel ASTs: no kernel reads a buffer it writes at another index.

The numpy interpreter evaluates every load before any store lands, so a kernel that reads
`buf[r1*3 + r0]` while it writes `buf[r0*3 + r1]` gives the right answer there, and the wrong
one on any backend that runs its lanes element by element or in parallel. The rule checked here
is the one a backend can rely on: every LOAD from a buffer the kernel also STOREs to uses the
same index expression as the store (validity gates aside: a gated lane reads or writes the same
address or nothing; where the expressions differ, the addresses are compared lane by lane, on the
lanes where the load's value is used: a lane that a WHERE sends the other way throws it away), and no
buffer is bound to two of a kernel's DEFINE_GLOBALs. Every LOAD and STORE index must also be inside
its buffer on the lanes its gate lets through (runtime/schedule/kernel_bounds.py).

`create_schedule` runs `check_kernel` on every kernel it makes and refuses an unsafe schedule.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rulec.runtime.schedule.kernel_bounds import evaluate_lanes, gate_and_address, out_of_bounds
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp, untagged


class UnsafeKernelError(RuntimeError):
    """A kernel reads a buffer it writes at a different index, binds one buffer twice, or may index
    outside a buffer."""


# the number of kernels checked in this process (tests report it)
checked = 0


def _global_of(u: UOp) -> UOp | None:
    """The DEFINE_GLOBAL under an INDEX (or a STORE read back), if any."""
    while u.op in (Ops.INDEX, Ops.STORE):
        u = u.src[0]
    return u if u.op is Ops.DEFINE_GLOBAL else None


def _address(index: UOp) -> tuple[UOp, ...]:
    """The index expressions of an INDEX without their validity gates."""
    return tuple(i.src[1] if i.op is Ops.WHERE and i.src[2].op is Ops.INVALID else i for i in index.src[1:])


def unsafe_reads(ast: UOp) -> list[str]:
    """Why `ast` is unsafe: one line per LOAD that reads a stored buffer at a different index."""
    stores = [st for st in (ast.src if ast.op is Ops.SINK else (ast,)) if st.op is Ops.STORE]
    written: dict[UOp, set[tuple[UOp, ...]]] = {}
    for st in stores:
        if (g := _global_of(st.src[0])) is not None:
            written.setdefault(g, set()).add(_address(st.src[0]))
    problems: list[str] = []
    used_under: dict[UOp, list[UOp | None]] | None = None
    for u in ast.parents:  # the cached walk, not a copy of it: a LOAD is never the AST's root
        if u.op is not Ops.LOAD or u.src[0].op is not Ops.INDEX:
            continue
        g = _global_of(u.src[0])
        if g is None or g not in written:
            continue
        read = _address(u.src[0])
        others = [w for w in written[g] if w != read and not _same_on_every_lane(u.src[0], w)]
        if others:
            used_under = _used_under(stores) if used_under is None else used_under
            others = [w for w in others if not _same_where_used(u.src[0], w, used_under.get(u, [None]))]
        for w in others:
            problems.append(f"buf{g.arg} is read at [{', '.join(map(_text, read))}] "
                            f"and written at [{', '.join(map(_text, w))}]")
    return problems


def _same_on_every_lane(index: UOp, written: tuple[UOp, ...]) -> bool:
    """Whether a gated load's address equals the stored address on every lane the load's gate lets
    through, though the expressions differ (`12 + ((r1 - 2) * 6 + r0) % 6` is `r0 + 6 * r1` where
    `r1 == 2`): decided exactly over the loop nest, when it is small enough (kernel_bounds.EXACT_LIMIT)."""
    if len(index.src) != 2 or len(written) != 1:
        return False
    vals = evaluate_lanes([index.src[1], written[0]])
    if isinstance(vals, str):
        return False
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    keep, addr = gate_and_address(index.src[1], vals, shape)
    return bool(np.all(addr[keep] == np.broadcast_to(vals[written[0]], shape)[keep]))


def _used_under(stores: list[UOp]) -> dict[UOp, list[UOp | None]]:
    """For each LOAD, the conditions on the lanes where its value can reach a store: under the true side
    of WHERE(c, a, b) only lanes where c holds use `a` (None: every lane). A load whose value a lane
    throws away may read anything there, a place another lane writes included."""
    out: dict[UOp, list[UOp | None]] = {}
    seen: set[tuple[UOp, UOp | None]] = set()
    todo: list[tuple[UOp, UOp | None]] = [(st.src[1], None) for st in stores if len(st.src) > 1]
    while todo:
        u, cond = todo.pop()
        if (u, cond) in seen:
            continue
        seen.add((u, cond))
        if u.op is Ops.LOAD:
            out.setdefault(u, []).append(cond)
        if u.op is Ops.WHERE and u.dtype is not dtypes.index:
            c = u.src[0]
            todo += [(c, cond), (u.src[1], c if cond is None else cond & c), (u.src[2], cond)]
        else:
            todo += [(x, cond) for x in u.src]
    return out


def _same_where_used(index: UOp, written: tuple[UOp, ...], conds: list[UOp | None]) -> bool:
    """Whether a load's address equals the stored address on every lane where its value is used (its
    gate and one of `conds` hold), decided exactly over the loop nest like `_same_on_every_lane`."""
    if None in conds or len(index.src) != 2 or len(written) != 1:
        return False
    vals = evaluate_lanes([index.src[1], written[0], *conds])
    if isinstance(vals, str):
        return False
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    keep, addr = gate_and_address(index.src[1], vals, shape)
    used = np.zeros(shape, dtype=bool)
    for c in conds:
        used |= np.broadcast_to(vals[c] != 0, shape)
    keep &= used
    return bool(np.all(addr[keep] == np.broadcast_to(vals[written[0]], shape)[keep]))


# kernels found safe, by their untagged AST and buffer sizes (what the two analyses read): a training loop
# schedules the same kernels every step. Bounded: emptied when full
_safe: set[tuple] = set()
MAX_SAFE = 4096


def forget_safe() -> None:
    _safe.clear()


def check_kernel(ast: UOp, buffers: Sequence[UOp] = ()) -> None:
    """Raise UnsafeKernelError when `ast` (bound to `buffers`, if given) is not safe to run lane by lane."""
    global checked
    checked += 1
    sizes = _sizes(ast, buffers)
    key = (untagged(ast), frozenset((g.arg, n) for g, n in sizes.items()))
    problems = [] if key in _safe else unsafe_reads(ast) + out_of_bounds(ast, sizes)
    if not problems:
        if len(_safe) >= MAX_SAFE:
            _safe.clear()
        _safe.add(key)
    seen: dict[UOp, int] = {}
    for i, b in enumerate(buffers):
        if b in seen:
            problems.append(f"buf{seen[b]} and buf{i} are one buffer (aliased arguments)")
        seen.setdefault(b, i)
    if problems:
        from rulec.backends.kernel_text import kernel_text

        raise UnsafeKernelError("unsafe kernel: " + "; ".join(problems) + "\nkernel:\n" + kernel_text(ast))


def _sizes(ast: UOp, buffers: Sequence[UOp]) -> dict[UOp, int]:
    """The element count of each DEFINE_GLOBAL: its pointer's size, or the bound buffer's if smaller."""
    out: dict[UOp, int] = {}
    for g in ast.parents:  # the cached walk, not a copy of it: the root is a SINK or a STORE
        if g.op is Ops.DEFINE_GLOBAL:
            size = getattr(g.dtype, "size", -1)
            if isinstance(g.arg, int) and 0 <= g.arg < len(buffers) and isinstance(buffers[g.arg].arg, int):
                size = buffers[g.arg].arg if size < 0 else min(size, buffers[g.arg].arg)
            out[g] = size
    return out


def _text(u: UOp, depth: int = 0) -> str:
    # a short rendering of an index expression for the error message
    if depth > 20:
        return "..."
    if u.op is Ops.CONST:
        return str(u.arg)
    if u.op is Ops.RANGE:
        return f"r{u.arg[0]}"
    if u.op is Ops.DEFINE_VAR:
        return str(u.arg[0])
    names = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "/", Ops.MOD: "%", Ops.SUB: "-"}
    if u.op in names and len(u.src) == 2:
        return f"({_text(u.src[0], depth + 1)} {names[u.op]} {_text(u.src[1], depth + 1)})"
    return f"{u.op.name}({', '.join(_text(s, depth + 1) for s in u.src)})"
