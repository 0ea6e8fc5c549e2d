"""What realization needs to know of the frontend, kept below both: the live tensors, and which graphs
have no device (so the realizer never imports the Tensor class)."""
from __future__ import annotations

import weakref
from typing import Any

from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import devices_of as graph_devices  # noqa: F401 - the frontend's name
from rulec.runtime.ir.uop import UOp, substitute

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


def stored_graphs() -> dict[UOp, UOp]:
    """Each buffer that realize stored a read tensor to (`c.numpy()`) while the tensor still is it -> what
    the tensor was computed from (runtime/tensor/realize.py keeps it for gradients)."""
    return {k[1]: k[0] for x in list(all_tensors)
            if (k := getattr(x, "_realized_from", None)) is not None and k[1] is x.uop}


def graph_for_gradients(t: Any, stored: dict[UOp, UOp] | None = None) -> UOp:
    """The graph to differentiate `t` through: its graph, where each buffer a read tensor was stored to is
    what that tensor was computed from again (`stored`, by default `stored_graphs()`), so that
    `c.numpy(); c.mean().backward()` reaches what c was computed from, as in tinygrad 0.14."""
    stored = stored_graphs() if stored is None else stored
    root = t.uop
    for _ in range(len(stored) + 1):  # each pass opens the stored values the graphs opened so far read
        found = {s: g for s, g in stored.items() if root.reaches(s)}
        if not found:
            break
        root = substitute(root, found)
    return root
