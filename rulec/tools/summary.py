"""The tables `rulec run` prints after the script: stages, kernels and (with --check) the outputs."""
from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

from rulec.runtime.engine.trace import Trace
from rulec.tools.oracle import CheckedOutput

KERNEL_ROWS = 15  # the slowest kernels are listed; the rest are one line
PIPE_WIDTH = 200  # the width of tables written to a pipe or a file: wide enough that no name is cut


def console(stderr: bool = False) -> Console:
    """A console for the tools' tables: the terminal's width, or a wide one when the output is not a terminal
    (so that `rulec stats | grep` sees whole rule names)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else PIPE_WIDTH)


class LiveCount:
    """A transient status line on a terminal while a program runs ("running mlp.py · 6 kernels"), kept up to
    date after each realize; nothing when the output is not a terminal. It is a realize watcher."""

    def __init__(self, console: Console, what: str, trace: Trace | None = None):
        self.console, self.what, self.trace, self.status = console, what, trace, None

    def __enter__(self) -> LiveCount:
        if self.console.is_terminal:
            self.status = self.console.status(self.what)
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)

    def before_realize(self, tensors: tuple) -> None:
        pass

    def after_realize(self, tensors: tuple, items: list) -> None:
        if self.status is not None and self.trace is not None:
            runs = sum(k.runs for k in self.trace.kernels.values())
            self.status.update(f"{self.what} · {len(self.trace.kernels)} kernels compiled, {runs} runs")


def stage_table(trace: Trace) -> Table:
    """One row per (pipeline, stage), summed over every time it ran (codegen stages run once per kernel)."""
    rows: dict[tuple[str, str], list[Any]] = {}
    for rec in trace.stages:
        row = rows.setdefault((rec.pipeline, rec.name), [rec.kind, 0, 0, 0.0])
        row[1] += 1
        row[2] += rec.hits + rec.facts
        row[3] += rec.seconds
    t = Table(title="stages", title_justify="left")
    for col, just in (("pipeline", "left"), ("stage", "left"), ("engine", "left"), ("runs", "right"),
                      ("rule hits", "right"), ("ms", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for (pipeline, name), (kind, runs, hits, secs) in rows.items():
        t.add_row(short_pipeline(pipeline), name, kind, str(runs), str(hits), f"{secs * 1e3:.1f}")
    return t


def short_pipeline(label: str) -> str:
    """"schedule/pipeline.yaml" -> "schedule", "codegen/cpu.pipeline.yaml" -> "codegen/cpu"."""
    folder, _, name = label.partition("/")
    stem = name.removesuffix(".yaml").removesuffix("pipeline").rstrip(".")
    return f"{folder}/{stem}" if stem else folder


def kernel_table(trace: Trace) -> Table:
    kernels = sorted(trace.kernels.values(), key=lambda k: -(k.run_seconds + k.compile_seconds))
    t = Table(title="kernels", title_justify="left")
    for col, just in (("kernel", "left"), ("device", "left"), ("compile ms", "right"), ("runs", "right"),
                      ("run ms", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for k in kernels[:KERNEL_ROWS]:
        t.add_row(k.name, k.device, f"{k.compile_seconds * 1e3:.1f}", str(k.runs), f"{k.run_seconds * 1e3:.2f}")
    rest = kernels[KERNEL_ROWS:]
    if rest:
        t.add_row(f"... {len(rest)} more", "", f"{sum(k.compile_seconds for k in rest) * 1e3:.1f}",
                  str(sum(k.runs for k in rest)), f"{sum(k.run_seconds for k in rest) * 1e3:.2f}")
    return t


def check_table(results: list[CheckedOutput]) -> Table:
    t = Table(title="check against float64 numpy", title_justify="left")
    for col, just in (("output", "left"), ("shape", "left"), ("dtype", "left"), ("max |diff|", "right"),
                      ("", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in results:
        t.add_row(r.label, str(r.shape), r.dtype, f"{r.max_diff:.3g}", "ok" if r.ok else "[bold red]MISMATCH")
    return t


def totals(trace: Trace, wall: float) -> str:
    by_pipeline: dict[str, float] = defaultdict(float)
    for rec in trace.stages:
        by_pipeline[rec.pipeline.split("/")[0]] += rec.seconds
    ks = trace.kernels.values()
    runs = sum(k.runs for k in ks)
    return (f"{len(trace.kernels)} distinct kernels, {runs} kernel runs; scheduling "
            f"{by_pipeline.get('schedule', 0.0) * 1e3:.0f} ms, lowering {by_pipeline.get('codegen', 0.0) * 1e3:.0f} ms, "
            f"compiling {sum(k.compile_seconds for k in ks) * 1e3:.0f} ms, running "
            f"{sum(k.run_seconds for k in ks) * 1e3:.0f} ms; {wall:.2f} s in all")


def print_summary(console: Console, trace: Trace, wall: float, checks: list[CheckedOutput] | None) -> None:
    console.print(stage_table(trace))
    console.print(kernel_table(trace))
    if checks is not None:
        console.print(check_table(checks))
    console.print(totals(trace, wall))
