"""One-line renderings of UOps for the terminal tools: `OP:dtype(arg; sources...)`, sources to a depth,
deeper ones by their structural id."""
from __future__ import annotations

from typing import Any

from rulec.runtime.engine.node_ids import NodeIds, arg_key

ARG_LIMIT = 60


def show(u: Any, ids: NodeIds, depth: int = 2) -> str:
    parts = []
    arg = arg_key(u.arg, ids) if u.arg is not None else ""
    if len(arg) > ARG_LIMIT:
        arg = arg[: ARG_LIMIT - 3] + "..."
    if arg:
        parts.append(arg)
    for s in u.src:
        parts.append(show(s, ids, depth - 1) if depth > 0 else ids(s))
    dtype = str(u.dtype).removeprefix("dtypes.")
    return f"{u.op.name}:{dtype}" + (f"({'; '.join(parts)})" if parts else "")
