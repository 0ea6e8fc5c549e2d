"""`TinyJit`, for scripts written for tinygrad 0.14 (`from tinygrad import TinyJit`; here `from rulec import
TinyJit`): the decorated function runs as written every call, and the tensors it returns are realized
before the call returns, as tinygrad's jit does.

rulec does not capture and replay kernels: a call builds its graph anew, whose schedule is the previous
call's (schedules are kept by graph, with stand-ins for its buffers: runtime/schedule/schedule_cache.py),
and compiled kernels are cached by their code, so a call with the same shapes schedules and compiles
nothing.

It keeps tinygrad's contract, so that a script that runs here runs there too. The calls are counted as
tinygrad counts them: the first runs plainly, the second is tinygrad's capture, later ones its replay.
`JitError` is raised where tinygrad raises it:

* every call: two inputs on one buffer, or an input with no buffer to stand for (a constant such as
  `Tensor(2)`, an `arange`); inputs not yet computed are realized first, as tinygrad does;
* the capture call: no kernel ran, the function returned something other than tensors, or it read a
  tensor's values (`item()`, `tolist()`, `numpy()`: tinygrad would bake them in); a jit captured while
  another captures is a RuntimeError;
* after the capture: the tensor inputs differ from the capture's (passed by position instead of name, or
  another shape, dtype, device or view of their buffer; one contiguous run of a buffer, such as a row, is
  the same view at any offset: tinygrad's `rows[i].contiguous()` is a buffer of its own).

`Context(JIT=0)` (or JIT=0 in the environment) turns the three call kinds off: every call runs plainly.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from rulec.helpers import JIT


class JitError(Exception):
    """A call tinygrad's jit refuses (see the module doc)."""


# the jit whose capture call is running (tinygrad captures one at a time)
_capturing: list[TinyJit] = []


class TinyJit:
    """`@TinyJit`, `TinyJit(f)` or `@TinyJit(prune=True)` (options are accepted and change nothing here)."""

    def __new__(cls, fxn: Callable[..., Any] | None = None, **options: Any) -> Any:
        if fxn is None:  # `@TinyJit(prune=True)`: a decorator
            return functools.partial(cls, **options)
        return super().__new__(cls)

    def __init__(self, fxn: Callable[..., Any], **_options: Any):
        self.fxn = fxn
        self.cnt = 0  # successful calls so far: 0 runs plainly, 1 is the capture, then the replays
        self._signature: tuple[list[int | str], list[tuple]] | None = None
        functools.update_wrapper(self, fxn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names, signature, input_buffers = _prepare_inputs(args, kwargs)
        if not JIT or self.cnt == 0:
            ret = _run(self.fxn, args, kwargs)
        elif self.cnt == 1:
            ret = self._capture(args, kwargs, input_buffers)
            self._signature = (names, signature)
        else:
            self._check_inputs(names, signature)
            ret = _run(self.fxn, args, kwargs)
        self.cnt += 1
        return ret

    def _capture(self, args: tuple, kwargs: dict, input_buffers: list[Any]) -> Any:
        from rulec.runtime.tensor import realize

        if _capturing:
            raise RuntimeError("having TinyJit inside another TinyJit is not supported (tinygrad refuses to capture "
                               "a jit while another one captures)")
        kernels = _KernelCounter()
        _capturing.append(self)
        realize.WATCHERS.append(kernels)
        realize.DATA_READ_GUARDS.append(_refuse_data_read)
        try:
            ret = _run(self.fxn, args, kwargs)
        finally:
            _capturing.clear()
            realize.WATCHERS.remove(kernels)
            realize.DATA_READ_GUARDS.remove(_refuse_data_read)
        # host-made values (rulec draws random numbers on the host) are work too: a returned buffer that is
        # not an input's
        made = {b for t in _flat(ret) if hasattr(t, "uop") for b in _buffers_of(t)} - set(input_buffers)
        if not kernels.count and not made:
            raise JitError("the jitted function ran no kernel in its capture call (tinygrad: didn't JIT anything!)")
        _check_tensors_only(ret)
        return ret

    def _check_inputs(self, names: list[int | str], signature: list[tuple]) -> None:
        assert self._signature is not None
        want_names, want = self._signature
        if names != want_names:
            raise JitError(f"args mismatch in JIT: the tensor arguments were {want_names} (positions or names) "
                           f"when captured, now {names}")
        if signature != want:
            raise JitError(f"args mismatch in JIT: tensor inputs (shape, dtype, device, view) were {want} when "
                           f"captured, now {signature}")

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a decorated method binds like a function
        return self if obj is None else functools.partial(self.__call__, obj)

    def reset(self) -> None:
        """Forget the calls so far: the next call runs plainly and the one after captures again."""
        self.cnt = 0
        self._signature = None


def _run(fxn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    from rulec.runtime.tensor.tensor import Tensor

    ret = fxn(*args, **kwargs)
    outs = [t for t in _flat(ret) if isinstance(t, Tensor)]
    if outs:
        Tensor.realize(*outs)
    return ret


class _KernelCounter:
    """A realize watcher counting the kernels (copies included) run while a capture call runs."""

    def __init__(self) -> None:
        self.count = 0

    def before_realize(self, tensors: Any) -> None:
        pass

    def after_realize(self, tensors: Any, items: list[Any]) -> None:
        self.count += len(items)


def _refuse_data_read(t: Any) -> None:
    raise JitError(f"reading the values of a tensor of shape {t.shape} while TinyJit captures: tinygrad would bake "
                   "them into the replays (read them outside the jitted function)")


def _check_tensors_only(ret: Any) -> None:
    from rulec.runtime.tensor.tensor import Tensor

    for x in _flat(ret):
        if x is not None and not isinstance(x, Tensor):
            raise JitError(f"a jitted function returns only tensors (in lists, tuples, dicts), not {type(x).__name__}")


def _prepare_inputs(args: tuple, kwargs: dict) -> tuple[list[int | str], list[tuple], list[Any]]:
    """The names (positions, keyword names) of the tensor arguments and the signature of every input
    tensor (those arguments, then the tensors directly inside list, tuple and dict arguments), and their
    buffers; realizes
    inputs not yet computed. Raises JitError for an input with no buffer and for two inputs on one buffer."""
    from rulec.runtime.tensor.live import is_virtual
    from rulec.runtime.tensor.realize import is_view
    from rulec.runtime.tensor.tensor import Tensor

    named = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)]
    named += [(k, v) for k, v in sorted(kwargs.items()) if isinstance(v, Tensor)]
    tensors = [t for _, t in named]
    for x in (*args, *kwargs.values()):
        inner = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else ()
        tensors += [t for t in inner if isinstance(t, Tensor) and all(t is not u for u in tensors)]
    if any(is_virtual(t.uop) for t in tensors):
        raise JitError("JIT inputs must be real buffers: a constant or an arange has none (use .contiguous().realize() "
                       "on a device tensor, or .clone())")
    pending = [t for t in tensors if not is_view(t.uop)]
    if pending:
        Tensor.realize(*pending)
    bufs = [b for t in tensors for b in _buffers_of(t)]
    if len(set(bufs)) != len(bufs):
        raise JitError("duplicate inputs to JIT: two input tensors share one buffer")
    return [n for n, _ in named], [(tuple(t.shape), t.dtype, t.device, _view_key(t)) for t in tensors], bufs


def _buffers_of(t: Any) -> list[Any]:
    from rulec.runtime.ir.ops import Ops

    return [u for u in t.uop.toposort() if u.op is Ops.BUFFER]


def _view_key(t: Any) -> Any:
    """How `t` views its buffer, with the buffer itself left out (a bound variable as its variable, not its
    value): two inputs with equal keys are read by the same kernels. A whole buffer in order, or one
    contiguous run of one (a row, a prefix), is "whole": tinygrad's `rows[i].contiguous()`, a buffer of its
    own there, is such a run here (contiguous() keeps it a view), and the run's offset is no view of it."""
    from rulec.runtime.ir.ops import Ops
    from rulec.runtime.tensor.tensor import _contiguous_view

    u = t.uop
    if (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER and u.src[0].arg == t.numel()) or _contiguous_view(u):
        return "whole"

    def key(x: Any) -> Any:
        if x.op in (Ops.BUFFER, Ops.CONST):
            return x.op.name
        if x.op is Ops.BIND:
            return key(x.src[0])
        return (x.op.name, repr(x.arg), tuple(key(s) for s in x.src))

    return key(u)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flat(v)]
    return [x]
