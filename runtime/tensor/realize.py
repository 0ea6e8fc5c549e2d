"""Realization: schedule tensors into kernels, run them, and make the tensors point at buffers.

Each kernel runs on the device of the buffer it writes (rulec.backends.device: compiled C on CPU, OpenCL
on CL, the numpy reference interpreter on PYTHON); new tensors live on `Device.DEFAULT`. A COPY between
devices is a copy of memory; views are not kernels.

Two kinds of tensors are never scheduled. One of no elements has nothing to compute (`to_numpy` gives
an empty array). One with no device (runtime/tensor/tensor.py: an `arange` and what is computed from it) stays
a function of its indices; `to_numpy` computes it with one kernel of its own and leaves the tensor as
it was.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from rulec.runtime import buffers
from rulec.backends.device import run_kernel
from rulec.backends.render import render
from rulec.runtime.device import Device
from rulec.runtime.ir.ops import Ops
from rulec.runtime.engine.pipeline import Pipeline
from rulec.runtime.schedule.kernel_bounds import evaluate_lanes
from rulec.runtime.schedule.scheduler import ScheduleItem, create_schedule, set_renderer
from rulec.runtime.ir.shape import device_of
from rulec.runtime.tensor.live import all_tensors, is_virtual
from rulec.runtime.ir.uop import UOp, op_mask, substitute

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

set_renderer(render)


class RealizeWatcher(Protocol):
    """Told about every `realize` (tools such as `rulec run --check` and `--emit` use this)."""

    def before_realize(self, tensors: tuple[Tensor, ...]) -> None: ...

    def after_realize(self, tensors: tuple[Tensor, ...], items: list[ScheduleItem]) -> None: ...


# the watchers of every realize, in order; empty unless a tool installed one
WATCHERS: list[RealizeWatcher] = []

# called with each tensor whose values are read back (numpy, item, tolist, data) before it is read; one may
# raise to refuse the read (TinyJit does while it captures: rulec/jit.py)
DATA_READ_GUARDS: list[Callable[[Tensor], None]] = []


def _sink(tensors) -> UOp:
    # a tensor of no elements needs no kernel; one without a device is never stored
    return UOp.sink(*[t.uop for t in tensors if 0 not in t.shape and not is_virtual(t.uop)])


def schedule(*tensors: Tensor, pipeline: Pipeline | None = None) -> list[ScheduleItem]:
    """The kernels that realizing `tensors` would run, in order (nothing runs)."""
    items, _ = create_schedule(_sink(tensors), pipeline)
    return items


def run_item(item: ScheduleItem, var_vals: dict[str, int] | None = None, device: str | None = None) -> None:
    """Run one kernel on `device`, by default the device of the buffer it writes. A COPY between devices
    is a copy of host memory: every device's buffers are host arrays (rulec.backends.device)."""
    arrays = [buffers.ensure_allocated(b) for b in item.buffers]
    if item.is_copy:
        _copy(item, arrays)
        return
    values = dict(var_vals or {})
    for b in item.bound_vars:
        values[b.src[0].arg[0]] = b.src[1].arg
    run_kernel(item.ast, arrays, values, device or item.device)


def _copy(item: ScheduleItem, arrays: list[np.ndarray]) -> None:
    """A COPY kernel: a buffer, or one run of its elements (`b[3:7].to(d)`, rows `m[1:3]`), into another
    buffer element for element (the scheduler realizes any other source a copy reads). A run's offset is
    read off the kernel's indices, lane by lane; anything else is refused, never guessed."""
    store = item.ast
    read = store.src[1].src[0]
    if not (read.op is Ops.LOAD and read.src[0].op is Ops.INDEX and len(arrays) == 2):
        raise RuntimeError(f"a COPY kernel that is not a buffer copy: {store}")
    dst, src = arrays
    if read.src[0].src[1:] == store.src[0].src[1:] and dst.size == src.size:
        dst[...] = src
        return
    offset = _run_offset(store.src[0].src[1], read.src[0].src[1], dst.size, src.size)
    if offset is None:
        raise RuntimeError(f"a COPY kernel that does not read one run of its source in order: {store}")
    dst.reshape(-1)[...] = src.reshape(-1)[offset:offset + dst.size]


def _run_offset(store_idx: UOp, read_idx: UOp, n: int, src_size: int) -> int | None:
    """The k for which the copy's lane storing element i reads element i + k, for every i in 0..n-1 and
    inside the source; None when the lanes do not read one run so."""
    if any(u.op is Ops.INVALID for u in read_idx.toposort()):
        return None
    vals = evaluate_lanes([store_idx, read_idx])
    if isinstance(vals, str):
        return None
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    stores = np.broadcast_to(vals[store_idx], shape).ravel()
    reads = np.broadcast_to(vals[read_idx], shape).ravel()
    if stores.size != n or not np.array_equal(np.sort(stores), np.arange(n)):
        return None
    k = int(reads[0] - stores[0])
    return k if 0 <= k and k + n <= src_size and np.all(reads - stores == k) else None


def _empty_as_const(u: UOp) -> UOp:
    """`u` with every part of no elements replaced by a constant of its shape (with `u`'s device).

    Such a part has no values, and a view of it (a pad) reads only padding: it needs no buffer, and
    the tensor's own graph must not keep computing it (the scheduler's `empty-is-const` rule does
    the same inside the schedule).
    """
    empty = [x for x in u.toposort() if x.op not in _LEAVES and x.shape and 0 in x.shape and x.base.op is not Ops.CONST]
    if not empty:
        return u
    device = () if is_virtual(u) else (UOp(Ops.DEVICE, arg=device_of(u, Device.DEFAULT)),)

    def const_view(x: UOp) -> UOp:
        c = UOp.const(x.dtype, 0, device)
        return UOp(Ops.EXPAND, x.dtype, (UOp(Ops.RESHAPE, x.dtype, (c,), (1,) * len(x.shape)),), tuple(x.shape))

    return substitute(u, {x: const_view(x) for x in empty})


_LEAVES = {Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.SINK}


def realize(*tensors: Tensor, pipeline: Pipeline | None = None, read: Tensor | None = None) -> list[ScheduleItem]:
    """Schedule, run every kernel, and replace the realized graphs by their buffers. `read` is a tensor
    realized only to read its values (`numpy()`, `item()`): it keeps differentiating through its graph."""
    for t in tensors:
        t.uop = _empty_as_const(t.uop)
    for w in WATCHERS:
        w.before_realize(tensors)
    sink = _sink(tensors)
    items, becomes = create_schedule(sink, pipeline)
    for item in items:
        run_item(item)
    # a view of existing buffers is its own value: rebinding it to a copy the schedule made (an assign's
    # value is stored to a fresh buffer first) would detach its readers from a buffer later assigns write
    becomes = {u: v for u, v in becomes.items() if not is_view(u)}
    if becomes:
        done = {u: _after_run(v) for u, v in becomes.items()}
        # the tensors realized here get their values; any other live tensor shares only the values that are
        # still current: one computed from a buffer this realize overwrote (an optimizer step's assign) was
        # the old contents, while a lazy tensor reads storage when it is realized (as in tinygrad 0.14)
        current = _still_current(done, sink)
        targets = {id(t) for t in tensors}
        for t in list(all_tensors):
            shared = done if id(t) in targets else current
            if t.uop in shared:
                if t is read:
                    _keep_graph_for_gradients(t, shared[t.uop])
                t.uop = shared[t.uop]
            elif any(p in shared for p in t.uop.parents):
                new = substitute(t.uop, shared)
                if t is read:
                    _keep_graph_for_gradients(t, new)
                t.uop = new
    for w in WATCHERS:
        w.after_realize(tensors, items)
    return items


_ASSIGN = op_mask(Ops.ASSIGN)


def _still_current(done: dict[UOp, UOp], sink: UOp) -> dict[UOp, UOp]:
    """The realized graphs in `done` whose stored values are still what they compute after this realize:
    those that read no buffer the realize assigned to (reads through the ASSIGN itself see the new contents)."""
    if not sink.has_op(_ASSIGN):  # the usual realize: nothing overwritten, no walk
        return done
    overwritten = {b for a in sink.toposort() if a.op is Ops.ASSIGN
                   for b in a.src[0].toposort(gate=lambda x: x.op is not Ops.ASSIGN) if b.op is Ops.BUFFER}
    if not overwritten:
        return done

    def reads_old_contents(u: UOp) -> bool:
        return not overwritten.isdisjoint(u.toposort(gate=lambda x: x.op is not Ops.ASSIGN))

    return {u: v for u, v in done.items() if not reads_old_contents(u)}


def _keep_graph_for_gradients(t: Tensor, stored: UOp) -> None:
    """A tensor realized to read its values still differentiates through what it was computed from
    (`loss.item()` then `loss.backward()`, as in tinygrad 0.14, where reading realizes a copy and leaves the
    tensor lazy; an explicit `realize()` cuts the graph there as here): autograd reads the graph kept here
    while the tensor is still that buffer (runtime/tensor/live.py: graph_for_gradients). A graph with an
    assign (an optimizer's update) is never kept: nothing differentiates through it, and it would hold the
    step's graph alive."""
    if t.dtype.is_float and is_view(stored) and all(u.op is not Ops.ASSIGN for u in t.uop.toposort()):
        t._realized_from = (t.uop, stored)


def is_view(u: UOp) -> bool:
    return all(x.op in _VIEW_OPS for x in u.toposort())


def _compute_virtual(u: UOp) -> UOp:
    """Store a tensor that has no device into a fresh buffer (one kernel); returns a view of it."""
    if all(x.op in _VIEW_OPS for x in u.toposort()):
        return u  # constants only: nothing to compute
    out = UOp(Ops.CONTIGUOUS, u.dtype, (u,))
    items, becomes = create_schedule(UOp.sink(out))
    for item in items:
        run_item(item)
    return _after_run(becomes[out])


def _after_run(u: UOp) -> UOp:
    """Once kernels ran, an ASSIGN of a kernel is just its buffer."""
    assigns = {a: a.src[0] for a in u.toposort() if a.op is Ops.ASSIGN and len(a.src) > 1
               and a.src[1].op is Ops.KERNEL}
    return substitute(u, assigns) if assigns else u


def to_numpy(t: Tensor) -> np.ndarray:
    """Realize `t` and read it back; a view of a buffer is read through its movement ops on the host."""
    from rulec.runtime.interpret.lazy_eval import evaluate

    for guard in DATA_READ_GUARDS:
        guard(t)

    if 0 in t.shape:
        return np.zeros(t.shape, buffers.numpy_dtype(t.dtype))
    if is_virtual(t.uop):
        return evaluate(_compute_virtual(t.uop))
    realize(t, read=t)
    # only views and constants may be left: anything else would be computed here, hiding a scheduler bug
    left = {u.op for u in t.uop.toposort()} - _VIEW_OPS
    if left:
        raise RuntimeError(f"realize left unscheduled ops {sorted(o.name for o in left)} in a tensor of shape {t.shape}")
    return evaluate(t.uop)


# (DETACH and CONTIGUOUS_BACKWARD only steer gradients: over a buffer they are its values)
_VIEW_OPS = {Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.RESHAPE, Ops.EXPAND,
             Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.MULTI, Ops.MSTACK, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD}
