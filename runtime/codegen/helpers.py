"""Helpers the codegen rule files (rules/codegen/) call from guards and results, and the steps of
runtime/codegen/steps.py read. Pure functions."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from rulec.runtime.ir.alu import reduce_identity
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import is_unit_loop
from rulec.runtime.ir.uop import UOp, substitute
from rulec.runtime.engine.matchers import current
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.schedule.kernel_bounds import conjuncts, gated_bounds, narrowing

# GPU targets launch at most this many thread-id dimensions (x, y, z)
MAX_THREAD_DIMS = 3


def zero_of(dtype: DType) -> UOp:
    """The constant 0 of `dtype`: what a load that is never valid reads."""
    return UOp.const(dtype.scalar, False if dtype.scalar == dtypes.bool else 0)


def reduce_start(red: UOp) -> Any:
    """The value an accumulator of REDUCE `red` starts from (its op's identity in its dtype)."""
    return reduce_identity(red.arg, red.dtype)


def _loops_of(u: UOp) -> tuple[UOp, ...]:
    """The loops a kernel-level root runs in: an END's ranges, in nesting order (outermost first)."""
    return u.src[1:] if u.op is Ops.END else ()


def thread_loops(sink: UOp) -> tuple[UOp, ...]:
    """The loops that become thread ids on a GPU: the innermost (at most three) loops, of constant size and
    kind "loop", that every root of the kernel runs in; () when some root runs in none (one thread then)."""
    roots = [s for s in sink.src if s.op is not Ops.NOOP]
    if not roots:
        return ()
    common = [r for r in _loops_of(roots[0]) if all(r in _loops_of(o) for o in roots[1:])]
    ok = [r for r in common if r.op is Ops.RANGE and r.src[0].op is Ops.CONST and kind_of(r) == "loop"]
    # keep the nesting order of the first root: a suffix of it, so the loops left stay outside the threads
    suffix: list[UOp] = []
    for r in reversed(_loops_of(roots[0])):
        if r not in ok or len(suffix) == MAX_THREAD_DIMS:
            break
        suffix.append(r)
    return tuple(reversed(suffix))


def kind_of(r: UOp) -> str:
    """A RANGE's kind: "loop" (the default), "reduce", "upcast", or the thread dimension it was chosen for."""
    return r.arg[1] if isinstance(r.arg, tuple) and len(r.arg) > 1 else "loop"


def with_thread_ids(sink: UOp, loops: tuple[UOp, ...]) -> UOp:
    """`sink` with each of `loops` replaced by a SPECIAL thread id (dimension 0 for the innermost). Kept for
    rule files of earlier revisions (`rulec diff REV`); today a step marks the loops and rules lower them."""
    n = len(loops)
    return substitute(sink, {r: UOp(Ops.SPECIAL, dtypes.index, (r.src[0],), n - 1 - k) for k, r in enumerate(loops)})


def implies(h: UOp, g: UOp) -> bool:
    """Whether the gate `h` implies `g` (both ANDs of conditions): every conjunct of `g` is one of `h`, or
    folds to true over the bounds that `h` sets."""
    held = conjuncts([h])
    known = set(held)
    for c in conjuncts([g]):
        if c not in known and not ((t := _given(c, held)).op is Ops.CONST and t.arg is True):
            return False
    return True


def within_given(x: UOp, gate: UOp, lo: int, hi: int) -> bool:
    """Whether `lo <= x <= hi` wherever `gate` holds: the kernel checker's gated interval analysis
    (runtime/schedule/kernel_bounds.py), which narrows what each comparison of the gate bounds."""
    bounds = gated_bounds(UOp(Ops.WHERE, x.dtype, (gate, x, UOp(Ops.INVALID, x.dtype))))
    return bounds is None or (lo <= bounds[0] and bounds[1] <= hi)  # None: the gate never holds


def simplified_given(x: UOp, gate: UOp) -> UOp:
    """`x` as it reads on the lanes where `gate` holds, when that is a smaller expression (else `x`).

    Each expression a comparison of the gate narrows (the kernel checker's `narrowing`) becomes a variable
    over its narrowed interval, `index_symbolic` folds what the narrower bounds decide (`a // 125` is 0
    where `a < 125`, `b % 25` is b where `b < 20`), and the variables are replaced by their expressions
    again. The result equals `x` wherever the gate holds; elsewhere a gated access does not happen."""
    return _given(x, conjuncts([gate]))


def _given(x: UOp, conds: list[UOp]) -> UOp:
    box = narrowing(conds)
    if not box or any(lo > hi for lo, hi in box.values()):
        return x  # nothing narrowed, or a gate no lane passes (the access is dropped elsewhere)
    to_var: dict[UOp, UOp] = {}
    for u in x.toposort():
        new = u.replace(src=tuple(to_var.get(s, s) for s in u.src)) if u.src else u
        if u in box:
            lo, hi = max(box[u][0], new.vmin), min(box[u][1], new.vmax)
            if (lo, hi) != (new.vmin, new.vmax):  # a bound the expression does not have by itself
                new = UOp(Ops.DEFINE_VAR, u.dtype, (), (f"<given {len(to_var)}>", lo, hi))
        if new is not u:
            to_var[u] = new
    if x not in to_var:
        return x
    folded = graph_rewrite(to_var[x], current()["index_symbolic"], name="symbolic (given a gate)")
    out = substitute(folded, {v: u for u, v in to_var.items() if v.op is Ops.DEFINE_VAR})
    return out if len(out.toposort()) < len(x.toposort()) else x


def simplified_gate(gate: UOp) -> UOp:
    """`gate` with repeated conditions dropped and each condition simplified given the others (one that
    the others imply drops out): the same lanes pass. `gate` itself when nothing changes."""
    conds = list(dict.fromkeys(reversed(conjuncts([gate]))))  # first-seen order, each condition once
    k = 0
    while k < len(conds):
        c = _given(conds[k], conds[:k] + conds[k + 1:])
        if c.op is Ops.CONST and c.arg is True:
            del conds[k]
            continue
        if c.op is Ops.CONST and c.arg is False:
            return c
        conds[k] = c
        k += 1
    if not conds:
        return UOp.const(gate.dtype, True)
    out = conds[0]
    for c in conds[1:]:
        out = UOp(Ops.AND, gate.dtype, (out, c))
    return out if out is not gate and len(out.toposort()) < len(gate.toposort()) else gate


# lanes of the upcast innermost output loop of a reduce kernel (runtime/codegen/steps.py); 8 measured
# better than 4 on both a 512x512 matmul (52 vs 68 ms) and the transformer block (141 vs 165 ms)
UPCAST = 8


def _output_loops(st: UOp) -> list[UOp]:
    """The loops a store runs in, outermost first, but those of one iteration (they become 0 later)."""
    return [r for r in st.src[2:] if not is_unit_loop(r)]


def _unrollable(r: UOp | None, lanes: int) -> bool:
    """Whether `r` is a plain loop of constant size, a multiple of `lanes` and at least twice it."""
    if r is None or r.op is not Ops.RANGE or r.src[0].op is not Ops.CONST or kind_of(r) != "loop":
        return False
    return r.src[0].arg % lanes == 0 and r.src[0].arg >= 2 * lanes


def _in_every_store(sink: UOp, pick: Any) -> UOp | None:
    """The loop `pick` finds in the first store of `sink` when it finds the same one in every store."""
    r = pick(sink.src[0])
    return r if all(pick(o) is r for o in sink.src[1:]) else None


def upcast_loop(sink: UOp) -> UOp | None:
    """The loop `upcast` unrolls: the innermost loop that every store of a kernel with a REDUCE runs in, of
    constant size a multiple of UPCAST (and at least twice it); None when there is none."""
    roots = [s for s in sink.src if s.op is Ops.STORE]
    if not roots or len(roots) != len(sink.src) or not any(u.op is Ops.REDUCE for u in sink.toposort()):
        return None
    r = _in_every_store(sink, lambda st: (_output_loops(st) or [None])[-1])
    return r if _unrollable(r, UPCAST) else None


def unroll_loop(sink: UOp, r: UOp, lanes: int = UPCAST) -> UOp:
    """`sink` with loop `r` of size n replaced by a loop of n/lanes and `lanes` copies of every store, lane k
    reading r*lanes + k. The new loop's id follows the kernel's largest."""
    ids = [u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE and isinstance(u.arg, tuple)]
    outer = UOp.range(r.src[0].arg // lanes, max(ids) + 1, "upcast")  # not a "loop": never upcast twice
    stores = []
    for st in sink.src:
        for k in range(lanes):
            lane = outer * lanes + k if k else outer * lanes
            body = substitute(UOp.sink(*st.src[:2]), {r: lane})
            stores.append(st.replace(src=(*body.src, *(outer if x is r else x for x in st.src[2:]))))
    return UOp.sink(*stores)


# lanes of the second loop of an upcast tile
UPCAST2 = 4
# the lanes a tile's first loop may take, and its second's: the largest that divides the loop; a tile has at
# most UPCAST * UPCAST2 lanes in all (each keeps an accumulator in a register)
FIRST_LANES = (UPCAST, 4)
SECOND_LANES = (UPCAST2, 2)


def upcast_tile(sink: UOp) -> tuple[tuple[UOp, int], ...]:
    """The loops `upcast` (runtime/codegen/steps.py) unrolls in a reduce kernel, each with its lanes: one or
    two output loops that every store runs in, each of constant size, a multiple of its lanes and at least
    twice them. Of those tiles, the one that loads least per output: a load inside a reduction is made once
    per lane of the tile loops its index reads, and shared by the lanes of the others (A @ B: a row of A
    serves every column lane, a column of B every row lane; a convolution: an input pixel serves every
    output-channel lane, a weight every pixel lane). Ties go to the larger tile, then to inner loops, so
    the first loop is the innermost where it can be. () when the kernel has no reduction or no such loop."""
    roots = [s for s in sink.src if s.op is Ops.STORE]
    if not roots or len(roots) != len(sink.src):
        return ()
    reduces = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    if not reduces:
        return ()
    loops = [r for r in _output_loops(roots[0]) if all(r in _output_loops(o) for o in roots[1:])]
    loads = {u for red in reduces for u in red.src[0].toposort() if u.op is Ops.LOAD}
    reads = [frozenset(u for u in load.src[0].toposort() if u.op is Ops.RANGE) for load in loads]

    def cost(tile: tuple[tuple[UOp, int], ...]) -> tuple:
        per_tile = sum(math.prod(n for r, n in tile if r in deps) for deps in reads)
        lanes = math.prod(n for _, n in tile)
        return (Fraction(per_tile, lanes), -lanes, *(-loops.index(r) for r, _ in tile))

    tiles: list[tuple[tuple[UOp, int], ...]] = []
    for first in loops:
        for a in (n for n in FIRST_LANES if _unrollable(first, n)):
            tiles.append(((first, a),))
            tiles += [((first, a), (second, b)) for second in loops if second is not first
                      for b in SECOND_LANES if a * b <= UPCAST * UPCAST2 and _unrollable(second, b)]
    return min(tiles, key=cost, default=())


# thread_loops, with_thread_ids, upcast_loop and unroll_loop: for rule files of earlier revisions, whose
# rules made the whole-kernel decisions the steps of runtime/codegen/steps.py make now; within_given too,
# whose one rule (gated-index-drops-mod) the gate rules of rules/codegen/gates.yaml subsume
CODEGEN_HELPERS = {"zero_of": zero_of, "reduce_start": reduce_start, "implies": implies,
                   "within_given": within_given, "simplified_given": simplified_given,
                   "simplified_gate": simplified_gate, "thread_loops": thread_loops, "with_thread_ids": with_thread_ids,
                   "upcast_loop": upcast_loop, "unroll_loop": unroll_loop}
