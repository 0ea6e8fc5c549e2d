"""`rulec run --check`: every realized output against a float64 numpy evaluation of its tensor graph.

Before each `realize`, the graphs of the tensors it realizes are evaluated by the tensor-level numpy
evaluator (runtime/interpret/lazy_eval.py) with every floating-point node in float64; after it, the
realized values are compared with those. Each realize is checked on its own inputs (the buffers earlier
realizes wrote), so an error is reported where it happens instead of compounding.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rulec.runtime.interpret.lazy_eval import evaluate, evaluate_all
from rulec.runtime.tensor.realize import is_view
from rulec.runtime.tensor.live import is_virtual

# (relative, absolute-per-unit-of-magnitude) tolerance by dtype kind and size: float32 results against a
# float64 reference differ by rounding, growing with reduction length; ints and bools must be exact
TOLERANCE = {2: (2e-2, 2e-2), 4: (1e-3, 1e-4), 8: (1e-9, 1e-12)}


@dataclass
class CheckedOutput:
    label: str  # where the script realized it ("mlp.py:31"), and which output of that realize
    shape: tuple[int, ...]
    dtype: str
    max_diff: float  # largest |got - reference|
    ok: bool
    detail: str = ""  # for a mismatch: the index, the value and the reference there


class Float64Check:
    """A realize watcher (runtime/tensor/realize.py WATCHERS) that checks every realized output."""

    def __init__(self, script: str | Path):
        self.script = str(Path(script).resolve())
        self.results: list[CheckedOutput] = []
        self._pending: list[tuple[str, list[Any], list[np.ndarray]]] = []

    @property
    def failures(self) -> list[CheckedOutput]:
        return [r for r in self.results if not r.ok]

    def before_realize(self, tensors: tuple[Any, ...]) -> None:
        # a tensor that is already a view of buffers computes nothing; one with no device is never stored
        checked = [t for t in tensors if 0 not in t.shape and not is_virtual(t.uop) and not is_view(t.uop)]
        refs = evaluate_all(*[t.uop for t in checked], wide=True) if checked else []
        self._pending.append((self._where(), checked, refs))

    def after_realize(self, tensors: tuple[Any, ...], items: list[Any]) -> None:
        where, checked, refs = self._pending.pop()
        for i, (t, ref) in enumerate(zip(checked, refs)):
            label = where if len(checked) == 1 else f"{where} (output {i + 1} of {len(checked)})"
            # the realized value, read from its buffers (t.numpy() would realize again)
            self.results.append(compare(label, evaluate(t.uop), ref))

    def _where(self) -> str:
        """The script's line that asked for this realize (the innermost frame in the script)."""
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.script or _same_file(frame.f_code.co_filename, self.script):
                return f"{Path(self.script).name}:{frame.f_lineno}"
            frame = frame.f_back
        return Path(self.script).name


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b)
    except OSError:
        return False


def compare(label: str, got: np.ndarray, ref: np.ndarray) -> CheckedOutput:
    """`got` (a realized output) against `ref` (its float64 reference), with the dtype's tolerance."""
    shape, dtype = tuple(got.shape), str(got.dtype)
    if got.shape != ref.shape:
        return CheckedOutput(label, shape, dtype, float("inf"), False,
                             f"shape {got.shape}, the reference has {ref.shape}")
    if got.dtype.kind not in "fc":
        bad = got != ref.astype(got.dtype)
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        return _result(label, shape, dtype, got, ref, diff, bad)
    g, r = got.astype(np.float64), ref.astype(np.float64)
    rtol, atol_unit = TOLERANCE.get(got.dtype.itemsize, TOLERANCE[4])
    finite = np.isfinite(r)
    scale = max(1.0, float(np.max(np.abs(r[finite]))) if finite.any() else 1.0)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite & np.isfinite(g), np.abs(g - r), 0.0)
        # non-finite values must agree exactly: nan where nan, inf of the same sign
        special = ~finite | ~np.isfinite(g)
        special_bad = special & ~((np.isnan(g) & np.isnan(r)) | (g == r))
        bad = (diff > atol_unit * scale + rtol * np.abs(r)) | special_bad
    diff = np.where(special_bad, np.inf, diff)
    return _result(label, shape, dtype, got, ref, diff, bad)


def _result(label: str, shape: tuple[int, ...], dtype: str, got: np.ndarray, ref: np.ndarray,
            diff: np.ndarray, bad: np.ndarray) -> CheckedOutput:
    max_diff = float(diff.max()) if diff.size else 0.0
    if not bad.any():
        return CheckedOutput(label, shape, dtype, max_diff, True)
    worst = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), bad.shape)
    detail = (f"{int(bad.sum())} of {bad.size} values differ; at index {tuple(int(i) for i in worst)}: "
              f"got {got[worst]!r}, float64 reference {ref[worst]!r}")
    return CheckedOutput(label, shape, dtype, max_diff, False, detail)
