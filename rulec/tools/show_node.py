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


def show_json(nodes: dict[str, Any], nid: str, depth: int = 2) -> str:
    """`show` for a node of a trace file (runtime/engine/trace_json.py): the same text from the node table."""
    n = nodes[nid]
    parts = []
    arg = n["arg"] if n["arg"] != "None" else ""
    if len(arg) > ARG_LIMIT:
        arg = arg[: ARG_LIMIT - 3] + "..."
    if arg:
        parts.append(arg)
    for s in n["src"]:
        parts.append(show_json(nodes, s, depth - 1) if depth > 0 else s)
    dtype = n["dtype"].removeprefix("dtypes.")
    return f"{n['op']}:{dtype}" + (f"({'; '.join(parts)})" if parts else "")
