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

from rulec.runtime.codegen.helpers import UPCAST, thread_loops, unroll_loop, upcast_loop
from rulec.runtime.ir.uop import UOp, substitute

__all__ = ["UPCAST", "THREAD_KINDS", "mark_thread_loops", "upcast"]

# the kind a RANGE chosen as thread id `d` gets (dimension 0 the innermost)
THREAD_KINDS = ("thread0", "thread1", "thread2")


def mark_thread_loops(sink: UOp) -> UOp:
    """`sink` with the loops that become thread ids on a GPU (`thread_loops`) marked: their kind is
    THREAD_KINDS[d], d the thread dimension (0 for the innermost)."""
    loops = thread_loops(sink)
    n = len(loops)
    return substitute(sink, {r: r.replace(arg=(r.arg[0], THREAD_KINDS[n - 1 - k])) for k, r in enumerate(loops)})


def upcast(sink: UOp) -> UOp:
    """A reduce kernel runs its innermost output loop UPCAST lanes at a time: the loop of size n becomes one
    of n/UPCAST, and each store is written once per lane with the index r*UPCAST + lane. The lanes'
    reductions share their reduce loops (the same RANGE nodes), so one pass over the reduced data feeds all
    of them, and what they read in common (a row of A in A @ B) is loaded once. Each lane still reduces in
    the same order: results are unchanged."""
    loop = upcast_loop(sink)
    return sink if loop is None else unroll_loop(sink, loop)
