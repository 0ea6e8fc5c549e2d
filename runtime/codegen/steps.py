"""The whole-kernel decisions of the codegen pipelines (rules/codegen/*.pipeline.yaml), as `call:` steps.

Each step makes one choice that needs the whole kernel (which loop to upcast, which loops become thread
ids). What follows from the choice is left to local rules where it can be one:

- `mark_thread_loops` only renames the chosen RANGEs' kind to `thread0`..`thread2` (the dimension);
  `rules/codegen/thread_ids.yaml` turns each marked RANGE into a SPECIAL, on either engine.
- `upcast` chooses the loop and unrolls it here. The unroll writes each store once per lane with the loop
  replaced by `r*UPCAST + lane` in that copy only: a substitution under a context. A rule sees one node at a
  time, and in an e-graph the loop is one e-class shared by every copy, so the copies could only be told
  apart by a substitution operator pushed through every op, which neither engine's rules have.
"""
from __future__ import annotations

from rulec.runtime.codegen.helpers import FIRST_LANES, UPCAST, UPCAST2, thread_loops, unroll_loop, upcast_tile
from rulec.runtime.ir.uop import UOp, substitute

__all__ = ["UPCAST", "UPCAST2", "INNER_LANES", "THREAD_KINDS", "mark_thread_loops", "upcast"]

# lanes of a tile's first loop where it divides the loop (a tile of INNER_LANES x UPCAST2). A 4 x 4
# tile measured 2.7x faster than 8 lanes of one loop on a 512x512 matmul, and 1.26x on the transformer block;
# 8 x 4 runs those as fast, and a training step of the block 1.2x faster (1622 against 1941 ms): an
# elementwise op fused into a matmul (the FFN's GELU) is recomputed once per tile of the innermost loop, so a
# wider tile recomputes its exp2 half as often
INNER_LANES = FIRST_LANES[0]

# the kind a RANGE chosen as thread id `d` gets (dimension 0 the innermost)
THREAD_KINDS = ("thread0", "thread1", "thread2")


def mark_thread_loops(sink: UOp) -> UOp:
    """`sink` with the loops that become thread ids on a GPU (`thread_loops`) marked: their kind is
    THREAD_KINDS[d], d the thread dimension (0 for the innermost)."""
    loops = thread_loops(sink)
    n = len(loops)
    return substitute(sink, {r: r.replace(arg=(r.arg[0], THREAD_KINDS[n - 1 - k])) for k, r in enumerate(loops)})


def upcast(sink: UOp) -> UOp:
    """A reduce kernel computes a tile of outputs at a time: the loops `upcast_tile` chooses (one or two
    output loops, INNER_LANES x UPCAST2 lanes at most) are unrolled, and each store is written once per lane
    with its loops' indices r*lanes + lane. The lanes' reductions share their reduce loops (the same RANGE
    nodes), so one pass over the reduced data feeds all of them, and a load that only some of the lanes
    need (a row of A, a column of B in A @ B) is loaded once for them. Each lane still reduces in the same
    order: results are unchanged."""
    for loop, lanes in upcast_tile(sink):
        sink = unroll_loop(sink, loop, lanes)
    return sink
