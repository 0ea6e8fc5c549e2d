"""The rule sets a pipeline's Python runs itself, handed to it by the pipeline.

Some callbacks and helpers rewrite a small graph of their own: index arithmetic is folded through
`index_symbolic`, a kernel is cut out with `kernel_globals` + `kernel_codegen`. Those sets must come from
the build the running pipeline was loaded from (a user's rule folder may define its own `index_symbolic`),
not from rulec's own rules. The pipeline file names them under `matchers:`; `run_pipeline` resolves them
from its build into a `StageMatchers` and makes it the *current* one (`current()`) for the duration of the
run: callbacks and pure helpers alike read it there (helpers called from rule guards and results are given
no context, since rules cannot pass one on). This is run-scoped state (a ContextVar), set and reset by
`run_pipeline` only.

Outside any run, `current()` is rulec's own rule sets, so a helper called directly still works.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable


class StageMatchers(Mapping[str, Any]):
    """Rule-set name -> Matcher, resolved on first use and kept; only the declared names (all, when None)."""

    def __init__(self, names: Iterable[str] | None, resolve: Callable[[str], Any], where: str):
        self._names = tuple(names) if names is not None else None
        self._resolve = resolve
        self._where = where
        self._got: dict[str, Any] = {}
        self._composed: dict[tuple[str, ...], Any] = {}

    # one pipeline's matchers: equal only to themselves (Mapping's __eq__ would load every set to compare)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __getitem__(self, name: str) -> Any:
        m = self._got.get(name)
        if m is None:
            if self._names is not None and name not in self._names:
                declared = ", ".join(self._names) or "none"
                raise KeyError(f"rule set {name!r} is not among the matchers of {self._where} "
                               f"(declared under `matchers:`: {declared})")
            m = self._got[name] = self._resolve(name)
        return m

    def composed(self, *names: str) -> Any:
        """The sets `names` as one matcher, in order; composed once."""
        m = self._composed.get(names)
        if m is None:
            m = self[names[0]]
            for n in names[1:]:
                m = m + self[n]
            self._composed[names] = m
        return m

    def __iter__(self) -> Iterator[str]:
        return iter(self._names if self._names is not None else tuple(self._got))

    def __len__(self) -> int:
        return len(self._names if self._names is not None else self._got)

    def __repr__(self) -> str:
        return f"<StageMatchers of {self._where}: {', '.join(self) or 'none'}>"


def _shipped(name: str) -> Any:
    from rulec.runtime.engine.artifacts import shipped_matcher

    return shipped_matcher(name)


SHIPPED = StageMatchers(None, _shipped, "rulec's own rules")

_current: ContextVar[StageMatchers | None] = ContextVar("rulec_stage_matchers", default=None)


def current() -> StageMatchers:
    """The matchers of the pipeline running now (rulec's own rule sets when none is)."""
    m = _current.get()
    return SHIPPED if m is None else m  # not `or`: a pipeline that declares no matchers is an empty mapping


@contextmanager
def running(matchers: StageMatchers):
    """Make `matchers` current for the block (run_pipeline wraps each run in this)."""
    token = _current.set(matchers)
    try:
        yield matchers
    finally:
        _current.reset(token)
