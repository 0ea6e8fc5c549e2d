"""Realization: schedule tensors into kernels, run them, and make the tensors point at buffers.

The kernels run on the numpy reference interpreter (runtime/interpret.py); a
backend can replace `run_item`. Copies and views are not kernels.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import buffers
from .interpret import run_kernel
from .ops import Ops
from .rewrite import substitute
from .schedule import Pipeline, ScheduleItem, create_schedule
from .uop import UOp

if TYPE_CHECKING:
    from .tensor import Tensor

def _sink(tensors) -> UOp:
    return UOp.sink(*[t.uop for t in tensors])


def schedule(*tensors: Tensor, pipeline: Pipeline | None = None) -> list[ScheduleItem]:
    """The kernels that realizing `tensors` would run, in order (nothing runs)."""
    items, _ = create_schedule(_sink(tensors), pipeline)
    return items


def run_item(item: ScheduleItem, var_vals: dict[str, int] | None = None) -> None:
    arrays = [buffers.ensure_allocated(b) for b in item.buffers]
    values = dict(var_vals or {})
    for b in item.bound_vars:
        values[b.src[0].arg[0]] = b.src[1].arg
    run_kernel(item.ast, arrays, values)


def realize(*tensors: Tensor, pipeline: Pipeline | None = None) -> list[ScheduleItem]:
    """Schedule, run every kernel, and replace the realized graphs by their buffers."""
    items, becomes = create_schedule(_sink(tensors), pipeline)
    for item in items:
        run_item(item)
    if becomes:
        done = {u: _after_run(v) for u, v in becomes.items()}
        from .tensor import all_tensors

        # every live tensor that shares a realized graph points at the buffers from now on
        for t in list(all_tensors):
            if t.uop in done:
                t.uop = done[t.uop]
            elif any(p in done for p in t.uop.toposort()):
                t.uop = substitute(t.uop, done)
    return items


def _after_run(u: UOp) -> UOp:
    """Once kernels ran, an ASSIGN of a kernel is just its buffer."""
    assigns = {a: a.src[0] for a in u.toposort() if a.op is Ops.ASSIGN and len(a.src) > 1
               and a.src[1].op is Ops.KERNEL}
    return substitute(u, assigns) if assigns else u


def to_numpy(t: Tensor) -> np.ndarray:
    """Realize `t` and read it back; a view of a buffer is read through its movement ops on the host."""
    realize(t)
    from .lazy_eval import evaluate

    # only views and constants may be left: anything else would be computed here, hiding a scheduler bug
    left = {u.op for u in t.uop.toposort()} - _VIEW_OPS
    if left:
        raise RuntimeError(f"realize left unscheduled ops {sorted(o.name for o in left)} in a tensor of shape {t.shape}")
    return evaluate(t.uop)


_VIEW_OPS = {Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.RESHAPE, Ops.EXPAND,
             Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}
