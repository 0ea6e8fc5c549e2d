"""Stage `assign ordering`: a kernel that reads a buffer runs before an assign overwrites it."""
from __future__ import annotations

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp


class AssignCycleError(RuntimeError):
    """A kernel must read a buffer's old contents after an assign overwrote them (as tinygrad: a cycle)."""


def _assign_kernels(sink: UOp) -> list[UOp]:
    return [u for u in sink.toposort() if u.op is Ops.ASSIGN and len(u.src) >= 2 and u.src[1].op is Ops.KERNEL]


def _raw_reads(a: UOp) -> list[UOp]:
    """The buffers the kernel of assign `a` reads as they were before this schedule (not through an ASSIGN)."""
    return [r for r in a.src[1].src if r.op is Ops.BUFFER and r is not a.src[0]]


def order_assigns(s: UOp) -> UOp:
    """Make every assign to a buffer wait for each kernel that reads the buffer's old contents.

    A kernel's source is a BUFFER when it reads the contents from before the schedule, and the ASSIGN
    when it reads what an assign wrote. Every assign to that buffer gains the reader's ASSIGN as a
    source, whatever the order the graph lists them in. A reader that itself depends on one of those
    assigns (directly or through the new dependencies) can't be ordered: AssignCycleError. A pipeline
    step (a whole-graph pass over the SINK); it adds every dependency at once.
    """
    assigns = _assign_kernels(s)
    writers: dict[UOp, list[UOp]] = {}
    for a in assigns:
        writers.setdefault(a.src[0], []).append(a)
    deps: dict[UOp, list[UOp]] = {}
    for u in assigns:
        for read in _raw_reads(u):
            for p in writers.get(read, ()):
                if p is not u and u not in p.src and u not in deps.get(p, ()):
                    deps.setdefault(p, []).append(u)
    if not deps:
        return s
    _refuse_cycles(assigns, deps)
    new: dict[UOp, UOp] = {}
    for x in s.toposort():  # rebuild sources first, so each node is rebuilt once
        src = tuple(new.get(y, y) for y in x.src) + tuple(new.get(d, d) for d in deps.get(x, ()))
        if src != x.src:
            new[x] = x.replace(src=src)
    return new.get(s, s)


def _refuse_cycles(assigns: list[UOp], deps: dict[UOp, list[UOp]]) -> None:
    """Raise AssignCycleError when the must-run-before relation over the assigns has a cycle."""
    index = {a: i for i, a in enumerate(assigns)}
    after: list[set[int]] = [set() for _ in assigns]  # after[i]: the assigns that must run before assign i
    for a in assigns:
        for x in a.toposort():
            if x is not a and x in index:
                after[index[a]].add(index[x])
        for d in deps.get(a, ()):
            after[index[a]].add(index[d])
    state = [0] * len(assigns)  # 0 new, 1 on the stack, 2 done
    for start in range(len(assigns)):
        if state[start]:
            continue
        stack = [(start, iter(after[start]))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state[nxt] == 1:
                buf = assigns[nxt].src[0]
                raise AssignCycleError(
                    f"cycle in the kernel graph: a kernel reads the old contents of a {buf.arg}-element "
                    f"{buf.dtype.name} buffer after an assign to it must already have run; realize the "
                    f"value that reads the old contents (.contiguous().realize()) before the assign")
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(after[nxt])))


# ------------------------------------------------------------------ earliest rewrites: assigns that swap


def _kernel_reads(value: UOp) -> tuple[set[UOp], set[UOp]]:
    """The buffers an assign's own kernel reads as they were, and the assigns its value reads after."""
    from rulec.runtime.ir.ops import GroupOp

    old = {u for u in value.toposort(gate=lambda u: u.op not in GroupOp.AlwaysContiguous)
           if u.op is Ops.BUFFER}
    after = {u for u in value.toposort() if u.op is Ops.ASSIGN}
    return old, after


def break_assign_swaps(s: UOp) -> UOp | None:
    """Assigns realized together that each read, as it was, a buffer another one writes (`a.assign(b)`
    with `b.assign(a)`, through any views) can't all run in place: each must run before the other.
    The value of every assign in such a cycle is computed into a fresh buffer first (as an assign that
    reads its own target elsewhere), so the copies run first and the assigns after. Without a cycle
    nothing changes, so ordinary assigns keep their single kernel."""
    from rulec.runtime.schedule.helpers import buffer_under

    assigns = [u for u in s.toposort() if u.op is Ops.ASSIGN and len(u.src) == 2
               and buffer_under(u.src[0]) is not None and u.src[1].op is not Ops.CONTIGUOUS]
    if len(assigns) < 2:
        return None
    index = {a: i for i, a in enumerate(assigns)}
    writers: dict[UOp, list[int]] = {}
    for a in assigns:
        writers.setdefault(buffer_under(a.src[0]), []).append(index[a])
    before: list[set[int]] = [set() for _ in assigns]  # before[i]: assigns that must run after assign i
    reads_old: list[set[int]] = [set() for _ in assigns]
    for a in assigns:
        i = index[a]
        old, after = _kernel_reads(a.src[1])
        for b in old:
            for j in writers.get(b, ()):
                if j != i and b is not buffer_under(a.src[0]):
                    before[i].add(j)
                    reads_old[i].add(j)
        for c in after:
            if c in index and c is not a:
                before[index[c]].add(i)
    cyclic = _on_cycles(before)
    wrap = {assigns[i]: assigns[i].replace(src=(assigns[i].src[0], UOp(Ops.CONTIGUOUS, assigns[i].dtype,
                                                                       (assigns[i].src[1],))))
            for i in cyclic if reads_old[i] & cyclic}
    if not wrap:
        return None
    new: dict[UOp, UOp] = {}
    for x in s.toposort():  # rebuild sources first, so each node is rebuilt once
        y = wrap.get(x, x)
        src = tuple(new.get(z, z) for z in y.src)
        if y is not x or src != x.src:
            new[x] = y.replace(src=src)
    return new.get(s, s)


def _on_cycles(edges: list[set[int]]) -> set[int]:
    """The nodes that lie on a cycle of the graph `edges` (i -> every j in edges[i])."""
    n = len(edges)
    reach: list[set[int]] = []
    for i in range(n):  # the graphs are a handful of assigns: a walk from each node is enough
        seen: set[int] = set()
        todo = list(edges[i])
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo.extend(edges[j])
        reach.append(seen)
    return {i for i in range(n) if i in reach[i]}
