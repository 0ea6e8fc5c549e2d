"""Order a lowered kernel into a program: loops as blocks, every node once, sources first.

This is the linearizer's real state (the issue's "only true state may be Python"): which loop each
node lives in and the order inside each loop. Everything else was decided by rules/codegen/.

Nesting comes from the ENDs: `END(body, r0, r1)` runs r1 inside r0, both inside the loops the END itself
is in (its open ranges). A node lives in the innermost loop among its open ranges, so a value that does
not change inside a loop is computed outside it (hoisted), but for a read-only load used only past a
reduction, which is loaded next to its users (`_sunk`). Inside one block, items (nodes and whole inner
loops) are ordered by their dependencies, ties broken by the order of the kernel's toposort.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp


class LinearizeError(RuntimeError):
    """A lowered kernel whose loops cannot be nested (a codegen rule bug, never a user's)."""


@dataclass(frozen=True)
class Step:
    kind: str  # "op": compute `uop`; "open": start the loop of RANGE `uop`; "close": end it
    uop: UOp


def linearize(sink: UOp) -> list[Step]:
    topo = list(sink.toposort())
    order = {u: i for i, u in enumerate(topo)}
    parent = _loop_parents(topo)
    depth: dict[UOp, int] = {}

    def depth_of(r: UOp) -> int:
        if r not in depth:
            p = parent[r]
            depth[r] = 0 if p is None else depth_of(p) + 1
        return depth[r]

    def innermost(ranges: tuple[UOp, ...]) -> UOp | None:
        best = None
        for r in ranges:
            if r not in parent:
                raise LinearizeError(f"range {r.arg} is used but no END closes it")
            if best is None or depth_of(r) > depth_of(best):
                best = r
        return best

    nodes = [u for u in topo if u.op is not Ops.SINK]
    # where each item sits: a RANGE is the loop item in its parent block; any other node in its innermost loop
    place = {u: (parent[u] if u.op is Ops.RANGE else innermost(u.ranges)) for u in nodes}

    def chain(b: UOp | None) -> list[UOp | None]:
        out: list[UOp | None] = [b]
        while b is not None:
            b = parent[b]
            out.append(b)
        return out[::-1]  # root (None) first

    written = {u.src[0].src[0] for u in nodes if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
    consumers: dict[UOp, list[UOp]] = {}
    for n in nodes:
        for s in n.src:
            consumers.setdefault(s, []).append(n)
    for u in nodes:
        if _reads_unwritten(u, written) and u in consumers:
            place[u] = _sunk(place[u], [chain(place[v]) for v in consumers[u]], chain)

    def item_at(x: UOp, block: UOp | None) -> UOp:
        """The item of `block` that holds `x`: x itself, or the inner loop of `block` around it."""
        c = chain(place[x])
        if c[-1] == block:
            return x
        return c[c.index(block) + 1]

    children: dict[UOp | None, list[UOp]] = {}
    for u in nodes:
        children.setdefault(place[u], []).append(u)
    after: dict[UOp, set[UOp]] = {u: set() for u in nodes}  # item -> items of the same block it needs first
    for n in nodes:
        for s in n.src:
            if s.op is Ops.RANGE and (n is s or s in chain(place[n]) or s is place[n]):
                continue  # a loop variable, read inside its own loop
            a, b = chain(place[n]), chain(place[s])
            k = 0
            while k + 1 < min(len(a), len(b)) and a[k + 1] == b[k + 1]:
                k += 1
            lca = a[k]
            i_n, i_s = item_at(n, lca), item_at(s, lca)
            if i_n is not i_s:
                after[i_n].add(i_s)

    steps: list[Step] = []

    def emit(block: UOp | None) -> None:
        items = children.get(block, [])
        pending = {u: len(after[u]) for u in items}
        users: dict[UOp, list[UOp]] = {}
        for u in items:
            for s in after[u]:
                users.setdefault(s, []).append(u)
        ready = [(order[u], u) for u in items if pending[u] == 0]
        heapq.heapify(ready)
        done = 0
        while ready:
            _, u = heapq.heappop(ready)
            done += 1
            if u.op is Ops.RANGE:
                steps.append(Step("open", u))
                emit(u)
                steps.append(Step("close", u))
            else:
                steps.append(Step("op", u))
            for v in users.get(u, []):
                pending[v] -= 1
                if pending[v] == 0:
                    heapq.heappush(ready, (order[v], v))
        if done != len(items):
            raise LinearizeError("a cycle between the items of one loop")

    emit(None)
    return steps


def _reads_unwritten(u: UOp, written: set[UOp]) -> bool:
    """A load of a buffer the kernel never stores to: it may move anywhere its index is computed."""
    return u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL \
        and u.src[0].src[0] not in written


def _sunk(block: UOp | None, user_chains: list[list[UOp | None]], chain) -> UOp | None:
    """Where a read-only load goes: into the deepest block around all its users, through output loops only.
    Loaded where its index is first known, a value used after a reduction (a bias, added once a tile's
    accumulators are done) holds a register through the reduction, which the accumulators need; it is
    loaded once per output iteration instead. Never into a reduction loop: that would load it each step."""
    common = min(len(c) for c in user_chains)
    lca = 0
    while lca + 1 < common and all(c[lca + 1] == user_chains[0][lca + 1] for c in user_chains):
        lca += 1
    target = user_chains[0][:lca + 1]
    here = chain(block)
    if target[:len(here)] != here:
        return block
    deeper = target[len(here):]
    if any(r.arg[-1] == "reduce" for r in deeper):
        return block
    return target[-1]


def _loop_parents(topo: list[UOp]) -> dict[UOp, UOp | None]:
    """For each RANGE that an END closes, the loop directly around it (None: the kernel's top level)."""
    enclosing: dict[UOp, tuple[UOp, ...]] = {}
    for u in topo:
        if u.op is not Ops.END:
            continue
        outer = tuple(u.ranges)
        for k, r in enumerate(u.src[1:]):
            if r.op is not Ops.RANGE:
                continue
            enc = outer + tuple(x for x in u.src[1:1 + k] if x.op is Ops.RANGE)
            if r in enclosing and set(enclosing[r]) != set(enc):
                raise LinearizeError(f"range {r.arg} is nested differently by two ENDs")
            enclosing[r] = enc
    depth: dict[UOp, int] = {}

    def depth_of(r: UOp, seen: tuple[UOp, ...] = ()) -> int:
        if r not in depth:
            if r in seen:
                raise LinearizeError(f"range {r.arg} is nested inside itself")
            depth[r] = 1 + max((depth_of(e, seen + (r,)) for e in enclosing.get(r, ())), default=-1)
        return depth[r]

    # the parent is the deepest enclosing range (the enclosing ranges of a range are one chain)
    return {r: (max(enc, key=depth_of) if enc else None) for r, enc in enclosing.items()}
