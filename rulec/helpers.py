"""`rulec.helpers`, as much of tinygrad's `tinygrad.helpers` as scripts written for tinygrad 0.14 reach
for: `Context` (scoped settings, `Context(TRAINING=1)`), `getenv`, the settings as objects (`TRAINING`,
`DEBUG`, `BEAM`, `JIT`, `NOOPT`: ContextVar, truthy and comparable as tinygrad's), `GlobalCounters`,
`Timing`, `tqdm`/`trange` (a progress line on stderr), `colored`, `prod`, `dedup`, `flatten`, `all_same`, and
the small pure helpers scripts import (`partition`, `unwrap`, `make_tuple`, `ceildiv`, `round_up`, `get_child`...),
and `fetch` (a download kept in the user cache: runtime/tensor/downloads.py).

Settings: TRAINING is `Tensor.training`. Other names are kept (readable with `getenv` inside the
context) and otherwise have no effect here: rulec has no BEAM search or DEBUG printing of its own.

GlobalCounters counts what rulec's `realize` runs (kernel_count; global_ops: the value operations of each
kernel, `ScheduleItem.ops`: each ALU op once per iteration of its loops, so a matmul of (M, K) and (K, N)
is 2*M*N*K; an estimate of the same kind as tinygrad's, not equal to it (tinygrad counts one add fewer per
reduce, and the ops its exp and log expand into); global_mem: the bytes of the buffers each kernel binds;
time_sum_s: the time of each realize, scheduling included).
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from typing import Any, Generic, Iterable, Iterator, TypeVar

from rulec.runtime.tensor.downloads import fetch  # noqa: F401 (tinygrad.helpers.fetch)

__all__ = ["Context", "getenv", "ContextVar", "TRAINING", "DEBUG", "BEAM", "JIT", "NOOPT", "GlobalCounters", "Timing",
           "tqdm", "trange", "colored", "prod", "dedup", "flatten", "all_same", "partition", "unwrap", "make_tuple",
           "to_tuple", "argfix", "argsort", "all_int", "ceildiv", "round_up", "round_down", "next_power2",
           "fully_flatten", "get_child", "merge_dicts", "get_single_element", "pluralize", "fetch"]

T = TypeVar("T")

_settings: dict[str, Any] = {}


def getenv(key: str, default: Any = 0) -> Any:
    """A setting: the innermost Context's value, else the environment's (as the default's type), else default."""
    if key in _settings:
        return _settings[key]
    if key == "TRAINING":
        from rulec.runtime.tensor.tensor import Tensor

        return int(bool(getattr(Tensor, "training", False)))
    raw = os.environ.get(key)
    if raw is None:
        return default
    return type(default)(raw) if default is not None else raw


@contextlib.contextmanager
def _context(values: dict[str, Any]) -> Iterator[None]:
    from rulec.runtime.tensor.tensor import Tensor

    saved = dict(_settings)
    training = getattr(Tensor, "training", False)
    _settings.update(values)
    if "TRAINING" in values:
        Tensor.training = bool(values["TRAINING"])
    try:
        yield
    finally:
        _settings.clear()
        _settings.update(saved)
        Tensor.training = training


class Context(contextlib.ContextDecorator):
    """`with Context(TRAINING=1): ...` (also a decorator): settings for the block, restored after it."""

    def __init__(self, **values: Any):
        self.values = values
        self._cm: Any = None

    def __enter__(self) -> Context:
        self._cm = _context(self.values)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def prod(xs: Iterable[Any], start: Any = 1) -> Any:
    return math.prod(xs, start=start)


def dedup(xs: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(xs))


def flatten(xss: Iterable[Iterable[Any]]) -> list[Any]:
    return [x for xs in xss for x in xs]


def all_same(xs: list[Any]) -> bool:
    return all(x == xs[0] for x in xs)


# small pure helpers that tinygrad scripts import from tinygrad.helpers (same behaviour, rulec's code)

def partition(xs: Iterable[T], pred: Any) -> tuple[list[T], list[T]]:
    """(the items where pred is true, the others), each in order."""
    yes: list[T] = []
    no: list[T] = []
    for x in xs:
        (yes if pred(x) else no).append(x)
    return yes, no


def unwrap(x: T | None) -> T:
    if x is None:
        raise ValueError("unwrap: the value is None")
    return x


def make_tuple(x: int | Iterable[int], n: int) -> tuple[int, ...]:
    """An int repeated n times, or the given sequence as a tuple."""
    return (x,) * n if isinstance(x, int) else tuple(x)


def to_tuple(x: Any) -> tuple[Any, ...]:
    return x if isinstance(x, tuple) else (x,)


def argfix(*x: Any) -> tuple[Any, ...]:
    """Arguments given spread out (`f(2, 3)`) or as one tuple or list (`f((2, 3))`), as one tuple."""
    if x and isinstance(x[0], (tuple, list)):
        if len(x) != 1:
            raise ValueError(f"bad arguments {x}: a tuple or list must be the only argument")
        return tuple(x[0])
    return x


def argsort(xs: Any) -> Any:
    """The indices that sort `xs`, as the same kind of sequence."""
    return type(xs)(sorted(range(len(xs)), key=xs.__getitem__))


def all_int(xs: Iterable[Any]) -> bool:
    return all(isinstance(x, int) for x in xs)


def ceildiv(num: Any, amt: Any) -> Any:
    out = -(num // -amt)
    return int(out) if isinstance(out, float) else out


def round_up(num: int, amt: int) -> int:
    return ceildiv(num, amt) * amt


def round_down(num: int, amt: int) -> int:
    return num // amt * amt


def next_power2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def fully_flatten(xs: Any) -> list[Any]:
    """Every scalar of a nested list/tuple/ndarray, in order (a 0-d array gives its one element)."""
    if isinstance(xs, str) or not (hasattr(xs, "__len__") and hasattr(xs, "__getitem__")):
        return [xs]
    if getattr(xs, "shape", None) == ():
        return [xs[()]]
    return [y for x in xs for y in fully_flatten(x)]


def get_child(obj: Any, key: str) -> Any:
    """Follow a dotted path such as "layers.0.weight": a number indexes, a dict is looked up by key, else
    an attribute is read."""
    for part in key.split("."):
        if part.isnumeric():
            obj = obj[int(part)]
        elif isinstance(obj, dict):
            obj = obj[part]
        else:
            obj = getattr(obj, part)
    return obj


def merge_dicts(ds: Iterable[dict[Any, Any]]) -> dict[Any, Any]:
    """One dict of all of them; a key given two different values is an error."""
    out: dict[Any, Any] = {}
    for d in ds:
        for k, v in d.items():
            if k in out and out[k] != v:
                raise ValueError(f"merge_dicts: key {k!r} has two values, {out[k]!r} and {v!r}")
            out[k] = v
    return out


def get_single_element(xs: Any) -> Any:
    if len(xs) != 1:
        raise ValueError(f"expected one element, got {len(xs)}: {xs!r}")
    return xs[0]


def pluralize(word: str, n: int) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class ContextVar:
    """A setting as an object (`if TRAINING: ...`, `DEBUG >= 2`): its value is getenv(key, default), read
    each time, so a Context or Tensor.training change is seen."""

    def __init__(self, key: str, default: Any):
        self.key, self.default = key, default

    @property
    def value(self) -> Any:
        return getenv(self.key, self.default)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, x: object) -> bool:
        return self.value == x

    def __hash__(self) -> int:
        return hash(self.key)

    def __ge__(self, x: Any) -> bool:
        return self.value >= x

    def __gt__(self, x: Any) -> bool:
        return self.value > x

    def __le__(self, x: Any) -> bool:
        return self.value <= x

    def __lt__(self, x: Any) -> bool:
        return self.value < x

    def __repr__(self) -> str:
        return f"ContextVar({self.key!r}, value={self.value!r})"


TRAINING, DEBUG, BEAM = ContextVar("TRAINING", 0), ContextVar("DEBUG", 0), ContextVar("BEAM", 0)
JIT, NOOPT = ContextVar("JIT", 1), ContextVar("NOOPT", 0)


class _GlobalCounters:
    """`GlobalCounters`: what rulec's realize ran since the last reset(): kernels, value operations, bytes
    bound, seconds (see the module doc). Counting starts when a program first asks for GlobalCounters."""

    kernel_count: int = 0
    global_ops: int = 0
    global_mem: int = 0
    time_sum_s: float = 0.0

    @staticmethod
    def reset() -> None:
        _GlobalCounters.kernel_count, _GlobalCounters.global_ops = 0, 0
        _GlobalCounters.global_mem, _GlobalCounters.time_sum_s = 0, 0.0


class _CountingWatcher:
    """A realize watcher (rulec.runtime.tensor.realize.WATCHERS) feeding GlobalCounters."""

    def __init__(self) -> None:
        self._starts: list[float] = []  # a watcher may see a realize inside another (nested realizes)

    def before_realize(self, tensors: Any) -> None:
        self._starts.append(time.perf_counter())

    def after_realize(self, tensors: Any, items: list[Any]) -> None:
        now = time.perf_counter()
        _GlobalCounters.time_sum_s += now - (self._starts.pop() if self._starts else now)
        for item in items:
            if not item.is_copy:
                _GlobalCounters.kernel_count += 1
                _GlobalCounters.global_ops += item.ops
            _GlobalCounters.global_mem += sum(b.arg * b.dtype.itemsize for b in item.buffers)


_watcher: _CountingWatcher | None = None


def count_kernels() -> None:
    """Start feeding GlobalCounters (idempotent). Done when a program first asks for GlobalCounters, so
    that programs that never read it pay nothing (and importing rulec.helpers stays cheap)."""
    global _watcher
    if _watcher is None:
        from rulec.runtime.tensor import realize

        _watcher = _CountingWatcher()
        realize.WATCHERS.append(_watcher)


def __getattr__(name: str) -> Any:
    if name == "GlobalCounters":
        count_kernels()
        return _GlobalCounters
    raise AttributeError(f"module 'rulec.helpers' has no attribute {name!r}")


class Timing(contextlib.ContextDecorator):
    """`with Timing("step "): ...` prints the block's wall time in ms (to stdout, as tinygrad)."""

    def __init__(self, prefix: str = "", on_exit: Any = None, enabled: bool = True):
        self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled

    def __enter__(self) -> Timing:
        self.st = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.et = time.perf_counter_ns() - self.st
        if self.enabled:
            print(f"{self.prefix}{self.et * 1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))


class tqdm(Generic[T]):  # noqa: N801 - tinygrad's (and tqdm's) spelling
    """A progress line on stderr: `for i in trange(n)`, `t.set_description(...)`, `t.update(k)`."""

    def __init__(self, iterable: Iterable[T] | None = None, desc: str = "", disable: bool = False, unit: str = "it",
                 unit_scale: bool = False, total: int | None = None, rate: int = 10):
        self.iterable, self.desc, self.disable, self.unit = iterable, desc, disable, unit
        sized = hasattr(iterable, "__len__")
        self.total = total if total is not None else len(iterable) if sized else None  # type: ignore[arg-type]
        self.n, self.st, self.rate, self._shown = 0, time.perf_counter(), rate, 0.0

    def __iter__(self) -> Iterator[T]:
        if self.iterable is None:
            raise ValueError("tqdm: iterating needs an iterable (tqdm(iterable) or trange(n))")
        try:
            for x in self.iterable:
                yield x
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> tqdm[T]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def set_description(self, desc: str) -> None:
        self.desc = desc
        self._show(force=False)

    def update(self, n: int = 0) -> None:
        self.n += n
        self._show(force=False)

    def close(self) -> None:
        if not self.disable:
            self._show(force=True)
            print(file=sys.stderr)
            self.disable = True

    def _show(self, force: bool) -> None:
        now = time.perf_counter()
        if self.disable or (not force and now - self._shown < 1 / self.rate):
            return
        self._shown = now
        of = f"/{self.total}" if self.total is not None else ""
        desc = f"{self.desc}: " if self.desc else ""
        print(f"\r{desc}{self.n}{of} {self.unit} [{now - self.st:.1f}s]", end="", file=sys.stderr, flush=True)


def trange(n: int, **kwargs: Any) -> tqdm[int]:
    return tqdm(range(n), total=n, **kwargs)


_COLORS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def colored(st: str, color: str | None, background: bool = False) -> str:
    """`st` in an ANSI color (`color` one of black, red, green, yellow, blue, magenta, cyan, white; an
    upper-case name is the bright one); None leaves it plain."""
    if color is None:
        return st
    if color.lower() not in _COLORS:
        raise ValueError(f"colored: unknown color {color!r}: expected one of {', '.join(_COLORS)} (or upper case)")
    code = 10 * background + 60 * color.isupper() + 30 + _COLORS.index(color.lower())
    return f"\u001b[{code}m{st}\u001b[0m"


def _register_settings() -> None:
    # the runtime reads settings through a hook it does not import from: here, a Context reaches it too
    from rulec.runtime.schedule import schedule_cache

    schedule_cache.setting = getenv


_register_settings()
