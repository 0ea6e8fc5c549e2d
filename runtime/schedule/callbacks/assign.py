"""Assigns, as two whole-graph pipeline steps.

`assign swaps` (after the earliest rewrites): assigns that must each run before the other get their
values computed into fresh buffers first. `assign ordering` (last): a kernel that reads a buffer's old
contents runs before every assign that overwrites it.
"""
from __future__ import annotations

from typing import Callable

from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.helpers import buffer_under


class AssignCycleError(RuntimeError):
    """A kernel must read a buffer's old contents after an assign overwrote them (as tinygrad: a cycle)."""


def order_assigns(s: UOp) -> UOp:
    """Make every assign to a buffer wait for each kernel that reads the buffer's old contents.

    A kernel's source is a BUFFER when it reads the contents from before the schedule, and the ASSIGN
    when it reads what an assign wrote. Every assign to that buffer (after that assign) gains the
    reader's ASSIGN as a source. A reader that itself depends on one of those assigns (directly or
    through the new dependencies) can't be ordered: AssignCycleError.
    """
    assigns = [u for u in s.toposort() if u.op is Ops.ASSIGN and len(u.src) >= 2 and u.src[1].op is Ops.KERNEL]
    writers: dict[UOp, list[UOp]] = {}
    for a in assigns:
        writers.setdefault(a.src[0], []).append(a)
    deps: dict[UOp, list[UOp]] = {}
    for u in assigns:
        for read in u.src[1].src:
            if read.op is Ops.BUFFER and read is not u.src[0]:
                overwriters = writers.get(read, ())
            elif read.op is Ops.ASSIGN:  # what an assign wrote is overwritten by the later assigns there
                # (`p is not read` first: every kernel reads the ASSIGNs of the kernels before it, and the
                # parents of each would be a walk of the whole graph below it)
                overwriters = [p for p in writers.get(read.src[0], ()) if p is not read and read in p.parents]
            else:
                continue
            for p in overwriters:
                if p is not u and u not in p.src and u not in deps.get(p, ()):
                    deps.setdefault(p, []).append(u)
    if not deps:
        return s
    index = {a: i for i, a in enumerate(assigns)}
    must_follow = [{index[x] for x in a.parents if x in index} | {index[d] for d in deps.get(a, ())}
                   for a in assigns]
    if cyclic := _on_cycles(must_follow):
        buf = assigns[min(cyclic)].src[0]
        raise AssignCycleError(
            f"cycle in the kernel graph: a kernel reads the old contents of a {buf.arg}-element "
            f"{buf.dtype.name} buffer after an assign to it must already have run; realize the "
            f"value that reads the old contents (.contiguous().realize()) before the assign")
    return _rebuild(s, deps)


def break_assign_swaps(s: UOp) -> UOp:
    """Assigns realized together that each read, as it was, a buffer another one writes (`a.assign(b)`
    with `b.assign(a)`, through any views) can't all run in place: each must run before the other.
    The value of every assign in such a cycle is computed into a fresh buffer first (as an assign that
    reads its own target elsewhere), so the copies run first and the assigns after. Without a cycle
    nothing changes, so ordinary assigns keep their single kernel."""
    assigns = [u for u in s.toposort() if u.op is Ops.ASSIGN and len(u.src) == 2
               and buffer_under(u.src[0]) is not None and u.src[1].op is not Ops.CONTIGUOUS]
    if len(assigns) < 2:
        return s
    index = {a: i for i, a in enumerate(assigns)}
    writers: dict[UOp, list[int]] = {}
    for a in assigns:
        writers.setdefault(buffer_under(a.src[0]), []).append(index[a])
    runs_before: list[set[int]] = [set() for _ in assigns]  # runs_before[i]: assigns that must run after i
    reads_old: list[set[int]] = [set() for _ in assigns]
    for i, a in enumerate(assigns):
        value = a.src[1]
        # the buffers its own kernel reads as they were (kernels below a realized node are others')
        for b in value.toposort(gate=lambda u: u.op not in GroupOp.AlwaysContiguous):
            if b.op is Ops.BUFFER and b is not buffer_under(a.src[0]):
                reads_old[i].update(j for j in writers.get(b, ()) if j != i)
        runs_before[i] |= reads_old[i]
        for c in value.toposort():  # the assigns whose results it reads run before it
            if c in index and c is not a:
                runs_before[index[c]].add(i)
    cyclic = _on_cycles(runs_before)
    copied = {assigns[i] for i in cyclic if reads_old[i] & cyclic}
    if not copied:
        return s
    return _rebuild(s, {}, lambda x, src: x.replace(src=(src[0], UOp(Ops.CONTIGUOUS, x.dtype, (src[1],))))
                    if x in copied else None)


# nodes whose consumers read a stored value, not the ops below it: a kernel boundary for the reads
_STORED = GroupOp.AlwaysContiguous - {Ops.BUFFER}


def realize_old_reads(s: UOp) -> UOp:
    """A value that reads one version of a buffer (its contents before the schedule, or what one assign
    wrote) and, through another source, a later one (`z = y + old_x` after `x.assign(..)` and
    `y.assign(y + x)`; `b * 10` read between two assigns to b, added to b) can't be one kernel: it would
    run both before and after the later assign. Each source that reads only the earlier version is
    computed into a fresh buffer first (a CONTIGUOUS), which assign ordering runs before the later
    assign. Values without such a mix are left as they are."""
    reads: dict[UOp, frozenset[UOp]] = {}  # the versions (BUFFER, ASSIGN) a node's kernel reads
    below: dict[UOp, frozenset[UOp]] = {}  # the assigns at or below a node (any kernel)
    done: dict[UOp, UOp] = {}
    for u in s.toposort():
        src = tuple(done[x] for x in u.src)
        if u.op not in _STORED and u.op not in (Ops.BUFFER, Ops.SINK):  # (a SINK is no kernel)
            src = _copy_earlier_version_sources(src, reads, below)
        nu = u if src == u.src else u.replace(src=src)
        done[u] = nu
        is_assign = nu.op is Ops.ASSIGN and buffer_under(nu.src[0]) is not None
        below[nu] = _union([frozenset((nu,)) if is_assign else frozenset(), *(below[x] for x in src)])
        reads[nu] = frozenset((nu,)) if nu.op is Ops.BUFFER or is_assign else frozenset() if nu.op in _STORED \
            else _union([reads[x] for x in src])
    return done[s]


def _union(sets: list[frozenset[UOp]]) -> frozenset[UOp]:
    """The union, sharing the one set when only one is not empty (most nodes: big graphs stay cheap)."""
    some = [x for x in sets if x]
    if len(some) <= 1:
        return some[0] if some else frozenset()
    return frozenset().union(*some)


def _later(a: UOp, version: UOp) -> bool:
    """Whether the assign `a` writes the buffer of `version` after it: any assign is after the contents
    from before the schedule; an assign is after another one to that buffer that it reads or overwrites."""
    buf = buffer_under(version) if version.op is Ops.ASSIGN else version
    return a is not version and buffer_under(a.src[0]) is buf and (version.op is Ops.BUFFER or version in a.parents)


def _copy_earlier_version_sources(src: tuple[UOp, ...], reads: dict[UOp, frozenset[UOp]],
                                  below: dict[UOp, frozenset[UOp]]) -> tuple[UOp, ...]:
    """`src` with each source that reads a version of a buffer that another source reads a later version
    of (or depends on a later assign to it) wrapped in a CONTIGUOUS (its sets recorded)."""
    read_here = _union([reads[x] for x in src])
    assigns_here = _union([below[x] for x in src])
    if not read_here or not assigns_here:
        return src
    stale = frozenset(v for v in read_here if any(_later(a, v) for a in assigns_here))
    if not stale:
        return src
    out = []
    for x in src:
        mine = reads[x] & stale
        if mine and not any(_later(a, v) for a in below[x] for v in mine):
            x = UOp(Ops.CONTIGUOUS, x.dtype, (x,))
            reads[x], below[x] = frozenset(), below[x.src[0]]
        out.append(x)
    return tuple(out)


def _on_cycles(edges: list[set[int]]) -> set[int]:
    """The nodes that lie on a cycle of the graph `edges` (i -> every j in edges[i])."""
    on: set[int] = set()
    for i in range(len(edges)):  # the graphs are a handful of assigns: a walk from each node is enough
        seen: set[int] = set()
        todo = list(edges[i])
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo.extend(edges[j])
        if i in seen:
            on.add(i)
    return on


def _rebuild(root: UOp, deps: dict[UOp, list[UOp]],
             edit: Callable[[UOp, tuple[UOp, ...]], UOp | None] | None = None) -> UOp:
    """`root` rebuilt with each node x also depending on deps[x], and edit(x, its new sources) in place of x
    where that is not None. Each node is rebuilt once, after its sources and its new dependencies (which
    may come later than x in the graph's own order)."""
    new: dict[UOp, UOp] = {}
    stack = [root]
    while stack:
        x = stack[-1]
        if x in new:
            stack.pop()
            continue
        srcs = (*x.src, *deps.get(x, ()))
        todo = [y for y in srcs if y not in new]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        src = tuple(new[y] for y in srcs)
        out = edit(x, src) if edit is not None else None
        new[x] = out if out is not None else x if src == x.src else x.replace(src=src)
    return new[root]
