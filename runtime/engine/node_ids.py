"""Structural node ids: a short hash of a node's op, dtype, arg, tag and the ids of its sources.

Two nodes with the same structure get the same id in every stage, every run and every process, so a
trace, a `rulec why` query and the explorer can all name a node the same way ("n3f2a9c01d7e4").
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import Any

ID_PREFIX = "n"
DIGEST_BYTES = 6  # 12 hex digits: collisions are negligible for graphs of millions of nodes


class NodeIds:
    """Ids of UOps, memoized: each distinct node is hashed once."""

    def __init__(self) -> None:
        self._ids: dict[Any, str] = {}

    def __call__(self, root: Any) -> str:
        ids = self._ids
        got = ids.get(root)
        if got is not None:
            return got
        # iterative post-order: graphs can be deeper than Python's recursion limit
        stack = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if node in ids:
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((s, False) for s in node.src if s not in ids)
                stack.extend((u, False) for u in _arg_uops(node.arg) if u not in ids)
                continue
            ids[node] = _digest(node, ids)
        return ids[root]

    def arg_text(self, arg: Any) -> str:
        """The arg as the trace shows it: UOps inside it are named by their ids."""
        return arg_key(arg, self)


def _digest(node: Any, ids: dict[Any, str]) -> str:
    text = "|".join((node.op.name, str(node.dtype), arg_key(node.arg, ids.__getitem__), repr(node.tag),
                     ",".join(ids[s] for s in node.src)))
    return ID_PREFIX + hashlib.blake2b(text.encode(), digest_size=DIGEST_BYTES).hexdigest()


def arg_key(arg: Any, name_of: Any) -> str:
    """A deterministic text of an arg (no memory addresses): UOps by `name_of`, containers by their parts."""
    if hasattr(arg, "op") and hasattr(arg, "src"):
        return "@" + name_of(arg)
    if isinstance(arg, (tuple, list)):
        inner = ", ".join(arg_key(a, name_of) for a in arg)
        return f"({inner},)" if isinstance(arg, tuple) and len(arg) == 1 else f"({inner})"
    if isinstance(arg, enum.Enum):
        return f"{type(arg).__name__}.{arg.name}"
    if dataclasses.is_dataclass(arg) and not isinstance(arg, type):
        fields = ", ".join(f"{f.name}={arg_key(getattr(arg, f.name), name_of)}" for f in dataclasses.fields(arg))
        return f"{type(arg).__name__}({fields})"
    return repr(arg)


def _arg_uops(arg: Any) -> list:
    if hasattr(arg, "op") and hasattr(arg, "src"):
        return [arg]
    if isinstance(arg, (tuple, list)):
        return [u for a in arg for u in _arg_uops(a)]
    if dataclasses.is_dataclass(arg) and not isinstance(arg, type):
        return [u for f in dataclasses.fields(arg) for u in _arg_uops(getattr(arg, f.name))]
    return []
