"""What realization needs to know of the frontend, kept below both: the live tensors, and which graphs
have no device (so the realizer never imports the Tensor class)."""
from __future__ import annotations

import weakref
from typing import Any

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import devices_of as graph_devices  # noqa: F401 - the frontend's name
from rulec.runtime.ir.uop import UOp

# every live Tensor: realizing a graph must update each tensor that shares it
all_tensors: weakref.WeakSet[Any] = weakref.WeakSet()

def is_virtual(uop: UOp) -> bool:
    """True when the graph reads no buffer and no user-made constant: it has no device to live on."""
    return not any(u.op is Ops.BUFFER or (u.op is Ops.CONST and u.src) for u in uop.toposort())


def made_from(view: Any, source: Any) -> Any:
    """Record that the tensor `view` (a movement op, bitcast or detach of `source`) was made from `source`
    (held, as numpy's views hold their base: the views in between are often temporaries, `t.T[1]`), so an
    assign to a view of a computed value reaches the tensors it views (Tensor.assign)."""
    view._made_from = source
    return view


def graph_for_gradients(t: Any) -> UOp:
    """The graph to differentiate `t` through: what it was computed from while it is still the buffer
    realize stored it to (runtime/tensor/realize.py keeps it), else its graph."""
    kept = getattr(t, "_realized_from", None)
    return kept[0] if kept is not None and kept[1] is t.uop else t.uop
