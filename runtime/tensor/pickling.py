"""Pickling tensors: the graph travels with the contents of the buffers it reads.

A BUFFER node is known by its UNIQUE id, which only means something in the process that made it: a graph
loaded elsewhere (or after its buffers were freed) must not find another tensor's buffer under the same
id, nor an empty one. So each buffer of a pickled graph is written as a `_BufferToken` (its dtype, size,
device and contents), and loading makes a fresh buffer for it. One token per buffer, kept while the
buffer lives: pickle writes an object it has seen once, so tensors pickled together that share a
buffer still share one after loading.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from rulec.runtime import buffers
from rulec.runtime.ir.dtype import DType
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp, substitute


class _BufferToken:
    """Stands for one BUFFER node in a pickle; loads as a fresh BUFFER with the same contents."""

    __slots__ = ("buf", "__weakref__")

    def __init__(self, buf: UOp):
        self.buf = weakref.ref(buf)  # weakly: the table of tokens must not keep its keys alive

    def __reduce__(self) -> tuple[Any, tuple]:
        b = self.buf()
        assert b is not None, "a buffer token pickled after its buffer was freed"
        device = b.src[1].arg
        contents = buffers.get(b) if buffers.is_allocated(b) else None
        return _fresh_buffer, (b.dtype, b.arg, device, contents)


_tokens: weakref.WeakKeyDictionary[UOp, _BufferToken] = weakref.WeakKeyDictionary()


def _token(buf: UOp) -> _BufferToken:
    tok = _tokens.get(buf)
    if tok is None:
        tok = _tokens[buf] = _BufferToken(buf)
    return tok


def _fresh_buffer(dtype: DType, size: int, device: Any, contents: np.ndarray | None) -> UOp:
    buf = buffers.new_buffer_uop(dtype, size, device)
    if contents is not None:
        buffers.adopt(buf, contents)
    return buf


def tensor_state(t: Any) -> tuple:
    """What a pickle keeps of a tensor: its graph, a token per buffer it reads, and its gradient state."""
    bufs = [u for u in t.uop.toposort() if u.op is Ops.BUFFER]
    return (t.uop, {b: _token(b) for b in bufs}, t.grad, t._requires_grad)


def restore_tensor(cls: type, uop: UOp, fresh: dict[UOp, UOp], grad: Any, requires_grad: bool | None) -> Any:
    """The tensor of `tensor_state`, its buffers replaced by the fresh ones loading made."""
    from rulec.runtime.tensor.live import all_tensors

    t = object.__new__(cls)
    t._init_autograd(requires_grad)
    t.uop = substitute(uop, fresh) if fresh else uop
    if grad is not None:
        t._grad = grad
    all_tensors.add(t)
    return t
