"""`rulec.helpers`, as much of tinygrad's `tinygrad.helpers` as scripts written for tinygrad 0.14 reach
for: `Context` (scoped settings, `Context(TRAINING=1)`), `getenv`, `prod`, `dedup`, `flatten`, `all_same`.

Settings: TRAINING is `Tensor.training`. Other names are kept (readable with `getenv` inside the
context) and otherwise have no effect here: rulec has no BEAM search or DEBUG printing of its own.
"""
from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Iterable, Iterator

__all__ = ["Context", "getenv", "prod", "dedup", "flatten", "all_same"]

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
