"""Recursive walks without Python recursion, for graphs of any depth.

A walk is written as a generator function: `result = yield child` stands for the recursive call
`result = walk(child)`, and `return value` returns as usual. `run_recursive` drives the generators
from an explicit stack, so the depth of the graph never meets the interpreter's recursion limit, and
the order of evaluation (side effects included) is exactly that of the recursive version.
"""
from __future__ import annotations

from typing import Any, Callable, Generator, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

Walk = Callable[[K], Generator[K, R, R]]


def run_recursive(walk: Walk, root: K, memo: dict[K, R] | None = None) -> R:
    """The value of `walk(root)`, each key computed once (its result kept in `memo`)."""
    memo = {} if memo is None else memo
    if root in memo:
        return memo[root]
    # one flat stack of key, generator, key, generator, ...: no tuple per frame
    stack: list[Any] = [root, walk(root)]
    sent: Any = None
    while stack:
        gen = stack[-1]
        try:
            child = gen.send(sent)
        except StopIteration as done:
            stack.pop()  # the generator that returned
            memo[stack.pop()] = sent = done.value
            continue
        if child in memo:
            sent = memo[child]
        else:
            stack.append(child)
            stack.append(walk(child))
            sent = None
    return memo[root]
