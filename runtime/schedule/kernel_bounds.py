"""A static bounds check of kernel ASTs: every LOAD and STORE stays inside its buffer.

For each `INDEX(DEFINE_GLOBAL, idx)` the check takes vmin/vmax of `idx` (runtime/ir/bounds.py) on the
lanes its validity gate lets through: a gate `WHERE(valid, idx, INVALID)` is a conjunction of
comparisons (`r0 < 2`, `0 < (r1 + 8*r3) % 7`, ...), and each comparison narrows the interval of the
expression it compares. Every narrowed subexpression of the index is replaced by a variable over its
narrowed interval, so the ordinary interval analysis of the index sees only the lanes that run.

Interval analysis loses the correlation between subexpressions, so an index it cannot place inside
the buffer is then checked exactly, lane by lane, when the loop nest it depends on is small enough
(`EXACT_LIMIT` lanes); past that an unproven index is reported. A gate that is never true means the
access never happens.
"""
from __future__ import annotations

import math

import numpy as np

from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp

# the most lanes an index that intervals cannot place is evaluated exactly over
EXACT_LIMIT = 1 << 22


def split_gate(index: UOp) -> tuple[list[UOp], UOp]:
    """The validity conditions around an index expression (nested gates too), and the expression."""
    conds: list[UOp] = []
    while index.op is Ops.WHERE and index.src[2].op is Ops.INVALID:
        conds.append(index.src[0])
        index = index.src[1]
    return conds, index


def conjuncts(conds: list[UOp]) -> list[UOp]:
    """The conditions of `conds` with every boolean AND split into its parts."""
    out, todo = [], list(conds)
    while todo:
        c = todo.pop()
        if c.op is Ops.AND and c.dtype.scalar.kind == "bool":
            todo.extend(c.src)
        else:
            out.append(c)
    return out


def narrowing(conds: list[UOp]) -> dict[UOp, tuple[int, int]]:
    """For every expression a gate compares, the interval the gate keeps it in."""
    box: dict[UOp, tuple[int, int]] = {}
    for c in conjuncts(conds):
        if c.op is Ops.CMPLT:
            a, b = c.src
            _keep(box, a, a.vmin, b.vmax - 1)  # a < b: a <= max(b) - 1, b >= min(a) + 1
            _keep(box, b, a.vmin + 1, b.vmax)
        elif c.op is Ops.CMPNE and c.src[0].op is Ops.CMPLT and c.src[1].op is Ops.CONST and c.src[1].arg is True:
            a, b = c.src[0].src  # not (a < b): a >= b
            _keep(box, a, b.vmin, a.vmax)
            _keep(box, b, b.vmin, a.vmax)
        elif c.op is Ops.CMPEQ:
            a, b = c.src
            _keep(box, a, b.vmin, b.vmax)
            _keep(box, b, a.vmin, a.vmax)
    return box


def _keep(box: dict[UOp, tuple[int, int]], u: UOp, lo: int, hi: int, depth: int = 0) -> None:
    """Narrow `u` to [lo, hi] in `box`, and what that bounds below it. (A module function: a nested
    recursive one would be a reference cycle, left to the garbage collector after every kernel.)"""
    if u.dtype.scalar.kind not in ("int", "uint", "index"):
        return  # float comparisons narrow nothing an index uses
    olo, ohi = box.get(u, (u.vmin, u.vmax))
    lo, hi = max(olo, lo), min(ohi, hi)
    box[u] = (lo, hi)
    if depth < 8 and lo <= hi:
        for x, xlo, xhi in _solve(u, lo, hi):  # `4 - r0 < 4` also bounds r0 (and so `2 - r0`)
            _keep(box, x, xlo, xhi, depth + 1)


def _solve(u: UOp, lo: int, hi: int) -> list[tuple[UOp, int, int]]:
    """What `lo <= u <= hi` says of u's sources: each source of a sum or difference, or the source of a
    product with a positive constant, lies in the interval the other operand leaves it (sound, not tight)."""
    if len(u.src) != 2:
        return []
    a, b = u.src
    if u.op is Ops.ADD:
        return [(a, lo - b.vmax, hi - b.vmin), (b, lo - a.vmax, hi - a.vmin)]
    if u.op is Ops.SUB:
        return [(a, lo + b.vmin, hi + b.vmax), (b, a.vmin - hi, a.vmax - lo)]
    if u.op is Ops.MUL:
        for x, k in ((a, b), (b, a)):
            if k.op is Ops.CONST and isinstance(k.arg, int) and k.arg > 0:
                return [(x, -(-lo // k.arg), hi // k.arg)]
    return []


def gated_bounds(index: UOp) -> tuple[int, int] | None:
    """(vmin, vmax) of an INDEX's address on the lanes its gate lets through; None if no lane does."""
    conds, expr = split_gate(index)
    if any(c.vmax is False or c.vmax == 0 for c in conds):
        return None
    box = narrowing(conds)
    if any(lo > hi for lo, hi in box.values()):
        return None  # the gate contradicts itself: no lane passes
    if not box:
        return expr.vmin, expr.vmax
    narrowed: dict[UOp, UOp] = {}
    for u in expr.toposort():
        new = u.replace(src=tuple(narrowed.get(s, s) for s in u.src)) if u.src else u
        if u in box:
            lo, hi = box[u]
            lo, hi = max(lo, new.vmin), min(hi, new.vmax)
            new = UOp(Ops.DEFINE_VAR, u.dtype, (), (f"gate{len(narrowed)}", lo, hi))
        if new is not u:
            narrowed[u] = new
    out = narrowed.get(expr, expr)
    return out.vmin, out.vmax


# ------------------------------------------------------------------ exact check of small loop nests

_BINARY = {
    Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.MAX: np.maximum,
    Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal, Ops.AND: np.bitwise_and,
    Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor, Ops.SHL: np.left_shift, Ops.SHR: np.right_shift,
}


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


def evaluate_lanes(nodes: list[UOp]) -> dict[UOp, np.ndarray] | str:
    """The integer value of each of `nodes` on every lane: over a grid of every RANGE (0..n-1) and
    DEFINE_VAR (its span) they use, broadcast (sparse). A string says why not (too many lanes, an op the
    evaluation lacks)."""
    root = UOp.sink(*nodes)
    free = [u for u in root.toposort() if u.op in (Ops.RANGE, Ops.DEFINE_VAR)]
    spans = [(0, u.vmax) if u.op is Ops.RANGE else (u.arg[1], u.arg[2]) for u in free]
    lanes = math.prod(hi - lo + 1 for lo, hi in spans)
    if lanes > EXACT_LIMIT:
        return f"its {lanes} lanes are too many to check one by one"
    grids = np.meshgrid(*[np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in spans], indexing="ij", sparse=True)
    vals: dict[UOp, np.ndarray] = dict(zip(free, grids))
    for u in root.toposort():
        if u in vals or u is root:
            continue
        s = [vals.get(x) for x in u.src]
        if u.op is Ops.CONST:
            vals[u] = np.array(u.arg if not isinstance(u.arg, bool) else int(u.arg), dtype=np.int64)
        elif u.op is Ops.INVALID:
            vals[u] = np.array(0, dtype=np.int64)
        elif u.op in _BINARY and len(s) == 2:
            vals[u] = _BINARY[u.op](s[0], s[1]).astype(np.int64)
        elif u.op is Ops.IDIV and not np.any(s[1] == 0):
            vals[u] = _c_div(s[0], s[1])
        elif u.op is Ops.MOD and not np.any(s[1] == 0):
            vals[u] = s[0] - s[1] * _c_div(s[0], s[1])
        elif u.op is Ops.NEG:
            vals[u] = -s[0]
        elif u.op is Ops.CAST and u.dtype.scalar.kind in ("int", "uint", "index", "bool"):
            vals[u] = (s[0] != 0 if u.dtype.scalar.kind == "bool" else s[0]).astype(np.int64)
        elif u.op is Ops.WHERE and len(s) == 3:
            vals[u] = np.where(s[0] != 0, s[1], s[2])
        elif u.op is Ops.BIND:
            vals[u] = s[0]
        else:
            return f"it uses {u.op.name}, which the exact check does not evaluate"
    return vals


def gate_and_address(index: UOp, vals: dict[UOp, np.ndarray], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The lanes an index's gate lets through and its address on every lane, broadcast to `shape`."""
    conds, expr = split_gate(index)
    keep = np.ones(shape, dtype=bool)
    for c in conds:
        keep &= np.broadcast_to(vals[c] != 0, shape)
    # a loop whose end is symbolic (`r < n`) spans up to the end's largest value on the grid: the lanes
    # past its end on a lane's own n never run
    for r, v in vals.items():
        if r.op is Ops.RANGE and r.src and r.src[0].op is not Ops.CONST and r.src[0] in vals:
            keep &= np.broadcast_to(v < vals[r.src[0]], shape)
    return keep, np.broadcast_to(vals[expr], shape)


def _exact(index: UOp) -> tuple[int, int] | None | str:
    """Exact (min, max) of the address over every lane the gate keeps (None: no lane), or why not."""
    vals = evaluate_lanes([index])
    if isinstance(vals, str):
        return vals
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    keep, addr = gate_and_address(index, vals, shape)
    if not keep.any():
        return None
    return int(addr[keep].min()), int(addr[keep].max())


def out_of_bounds(ast: UOp, sizes: dict[UOp, int] | None = None) -> list[str]:
    """Why `ast` may reach outside a buffer: one line per LOAD or STORE index not proven in bounds.

    `sizes` gives a DEFINE_GLOBAL's element count; by default, its pointer dtype's size."""
    problems: list[str] = []
    for u in (*ast.parents, ast):  # the cached walk, not a copy of it
        if u.op is not Ops.INDEX or len(u.src) != 2 or u.src[0].op is not Ops.DEFINE_GLOBAL:
            continue
        g = u.src[0]
        size = (sizes or {}).get(g, getattr(g.dtype, "size", -1))
        if size is None or size < 0:
            continue
        found = gated_bounds(u.src[1])
        if found is None or (0 <= found[0] and found[1] < size):
            continue
        exact = _exact(u.src[1])
        if exact is None or (isinstance(exact, tuple) and 0 <= exact[0] and exact[1] < size):
            continue
        if isinstance(exact, tuple):
            problems.append(f"buf{g.arg} (size {size}) is reached at indices {exact[0]}..{exact[1]}")
        else:
            problems.append(f"buf{g.arg} (size {size}): an index in {found[0]}..{found[1]} cannot be proven "
                            f"in bounds, and {exact}")
    return problems
