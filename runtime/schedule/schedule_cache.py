"""Schedules kept by the shape of their graph, buffers aside.

Each step of a training or inference loop builds the same graph over the same parameters and fresh
inputs, so its schedule is the previous step's with other buffers bound. A graph is scheduled with every
BUFFER it reads replaced by a stand-in (same dtype, size and device; a UNIQUE numbered by first use), so
equal steps are one hash-consed graph: the key. A kept schedule is then bound to the call's buffers:
stand-ins become the buffers they stood for, and each buffer the schedule made becomes a fresh one, so
two calls never share an output.

Nothing else may vary between the calls a schedule is reused for: the key holds the pipeline and the
default device (the device of a graph of constants alone). Bound variables stay in the graph, so their
values are part of the key too. A schedule that raised is not kept.
"""
from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from typing import Callable

from rulec.runtime.buffers import unique_id
from rulec.runtime.device import Device
from rulec.runtime.engine.trace import active_trace
from rulec.runtime.ir.ops import OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.uop import UOp

# SCACHE=0 schedules every graph anew (tinygrad's name for its own schedule cache switch), in the environment
# or in a `Context(SCACHE=0)`: `setting` reads it, and rulec.helpers (which the runtime does not import) puts
# its Context-aware getenv there. ENABLED, when not None, overrides both (tests)
ENABLED: bool | None = None


def setting(key: str, default: str) -> object:
    return os.environ.get(key, default)


def enabled() -> bool:
    if ENABLED is not None:
        return ENABLED
    return str(setting("SCACHE", "1")) not in ("0", "")

MAX_KEPT = 32
# (graph, id of the pipeline, default device) -> (the pipeline, kept alive so that its id is not reused while
# its schedules are kept; the schedule)
_kept: OrderedDict[tuple, tuple[object, tuple[list, dict[UOp, UOp]]]] = OrderedDict()


def forget_schedules() -> None:
    _kept.clear()


def cached_schedule(sink: UOp, pipeline: object, schedule: Callable[[UOp], tuple[list, dict[UOp, UOp]]]
                    ) -> tuple[list, dict[UOp, UOp]]:
    """`schedule(sink)`, reusing the schedule of an earlier graph equal to `sink` but for its buffers.
    While a trace records rewrites every graph is scheduled anew (a trace shows the rewrites that ran)."""
    if not enabled() or active_trace() is not None:
        return schedule(sink)
    stand_in, inputs, originals = _with_stand_ins(sink)
    # the stages by identity too: a pipeline whose stage list was edited in place is another pipeline
    stages = tuple(map(id, getattr(pipeline, "stages", ())))
    key = (stand_in, id(pipeline), stages, Device.DEFAULT)
    entry = _kept.pop(key, None)  # popped and put back last: most recently used last, without a second lookup
    if entry is None or entry[0] is not pipeline:
        entry = (pipeline, schedule(stand_in))
    _kept[key] = entry
    while len(_kept) > MAX_KEPT:
        _kept.popitem(last=False)
    return _bound(entry[1], inputs, originals)


def _with_stand_ins(sink: UOp) -> tuple[UOp, dict[UOp, UOp], dict[UOp, UOp]]:
    """`sink` with each BUFFER replaced by its stand-in; the buffers by stand-in, and the nodes of `sink` by
    the nodes that replaced them."""
    memo: dict[UOp, UOp] = {}
    inputs: dict[UOp, UOp] = {}
    for u in sink.toposort():
        if u.op is Ops.BUFFER and u.src and u.src[0].op is Ops.UNIQUE:
            new = u.replace(src=(UOp(Ops.UNIQUE, arg=-1 - len(inputs)), *u.src[1:]))
            inputs[new] = u
        else:
            srcs = tuple(memo[s] for s in u.src)
            new = u if all(a is b for a, b in zip(srcs, u.src)) else u.replace(src=srcs)
        memo[u] = new
    return memo[sink], inputs, {new: old for old, new in memo.items()}


def _bound(kept: tuple[list, dict[UOp, UOp]], inputs: dict[UOp, UOp], originals: dict[UOp, UOp]
           ) -> tuple[list, dict[UOp, UOp]]:
    """A kept schedule over this call's buffers: stand-ins replaced by theirs, the buffers the schedule
    made by fresh ones, and what each node becomes keyed by this call's own nodes."""
    items, becomes = kept
    buffers = dict(inputs)

    def bind(b: UOp) -> UOp:
        got = buffers.get(b)
        if got is None:  # made by the schedule: every call gets its own
            got = buffers[b] = b.replace(src=(UOp(Ops.UNIQUE, arg=unique_id()), *b.src[1:]))
        return got

    memo: dict[UOp, UOp] = {}

    def rebuilt(root: UOp) -> UOp:
        """`root` with every buffer bound (any node holding one is rebuilt above it)."""
        for u in root.toposort(gate=lambda n: n not in memo):
            if u in memo:
                continue
            if u.op is Ops.BUFFER and u.src and u.src[0].op is Ops.UNIQUE:
                memo[u] = bind(u)
                continue
            srcs = tuple(memo[s] for s in u.src)
            memo[u] = u if all(a is b for a, b in zip(srcs, u.src)) else u.replace(src=srcs)
        return memo[root]

    out_items = [dataclasses.replace(item, buffers=tuple(map(rebuilt, item.buffers))) for item in items]
    out_becomes = {originals[u]: rebuilt(v) for u, v in becomes.items()}
    return out_items, out_becomes
