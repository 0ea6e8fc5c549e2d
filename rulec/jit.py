"""`TinyJit`, for scripts written for tinygrad 0.14 (`from tinygrad import TinyJit`; here `from rulec import
TinyJit`): the decorated function runs as written every call, and the tensors it returns are realized
before the call returns, as tinygrad's jit does.

rulec does not capture and replay kernels: its scheduler is fast enough to schedule each call anew, and
compiled kernels are cached by their code, so a call with the same shapes compiles nothing.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


class TinyJit:
    def __init__(self, fxn: Callable[..., Any], **_options: Any):
        self.fxn = fxn
        self.cnt = 0  # calls so far (tinygrad scripts sometimes read it)
        functools.update_wrapper(self, fxn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from rulec.runtime.tensor.tensor import Tensor

        ret = self.fxn(*args, **kwargs)
        outs = [ret] if isinstance(ret, Tensor) else [t for t in _flat(ret) if isinstance(t, Tensor)]
        if outs:
            Tensor.realize(*outs)
        self.cnt += 1
        return ret

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a decorated method binds like a function
        return self if obj is None else functools.partial(self.__call__, obj)

    def reset(self) -> None:
        self.cnt = 0


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flat(v)]
    return [x]
