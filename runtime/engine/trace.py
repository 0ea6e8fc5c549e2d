"""Rewrite tracing: the stages that ran, every rule that fired (with the nodes before and after), the
kernels compiled and run, and per-rule hit counts and time.

Turn it on with the environment variable RULEC_TRACE=1 (events are printed to stderr as they happen, and
the per-rule table when the process exits), RULEC_TRACE=stats (the table only), RULEC_TRACE=FILE.json
(the whole trace written as JSON when the process exits, runtime/engine/trace_json.py), or from Python
with `with tracing() as t: ...`.

What is recorded is what happened: each step keeps the very nodes the rewrite saw and built (UOps are
immutable), each stage the graph it was given and the graph it returned. Nothing is rebuilt later.

When no trace is active the engines pay one `is None` test per rewrite call and per stage.
"""
from __future__ import annotations

import atexit
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from rulec.runtime.engine.matcher import RuleInfo


@dataclass
class RuleStat:
    tries: int = 0
    hits: int = 0
    seconds: float = 0.0


@dataclass
class TraceEvent:
    """One rewrite: `rule` turned `before` into `after` in stage `stage`."""

    stage: str
    rule: RuleInfo
    before: Any
    after: Any
    seconds: float = 0.0
    new: tuple = ()  # the nodes of `after` that no earlier step or stage of the trace held
    stage_index: int = -1  # the StageRecord it belongs to (-1: a rewrite outside any pipeline)

    def __str__(self) -> str:
        return f"[{self.stage}] {self.rule.name} ({self.rule.loc}): {_short(self.before)}  =>  {_short(self.after)}"


@dataclass
class StageRecord:
    """One stage of one pipeline run: its input and output graphs, its steps and its time."""

    pipeline: str  # the pipeline file, as "<folder>/<name>"; "" for a rewrite made outside any pipeline
    name: str
    kind: str  # "rules", "egglog" or "call"
    loc: str  # file:line of the stage in the pipeline file
    rules: tuple[str, ...]
    input: Any
    output: Any = None
    seconds: float = 0.0
    hits: int = 0  # rewrites
    facts: int = 0  # facts recorded by fact rules (no rewrite, no step)
    first_event: int = 0  # events[first_event:last_event] are its steps (when events are kept)
    last_event: int = 0
    matcher: Any = None  # the composed Matcher the stage ran (rules in order), for tools such as explain


@dataclass
class KernelRecord:
    """A kernel that was compiled (or interpreted) for a device, and how often and how long it ran."""

    name: str
    ast: Any
    device: str
    compile_seconds: float = 0.0
    runs: int = 0
    run_seconds: float = 0.0


def _short(u: Any, limit: int = 160) -> str:
    text = " ".join(repr(u).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Trace:
    """Everything recorded while a trace was active.

    keep_events: keep every step (a rule firing); without it only counts and times are kept.
    echo: print every step to stderr as it happens.
    """

    keep_events: bool = True
    echo: bool = False
    events: list[TraceEvent] = field(default_factory=list)
    stats: dict[RuleInfo, RuleStat] = field(default_factory=dict)
    stages: list[StageRecord] = field(default_factory=list)
    kernels: dict[tuple[Any, str], KernelRecord] = field(default_factory=dict)
    _open: list[int] = field(default_factory=list, repr=False)  # indexes of the stages running now
    _seen: set = field(default_factory=set, repr=False)  # every node some step or stage already held

    # ------------------------------------------------------------------ rewrites
    def record(self, stage: str, rule: RuleInfo, before: Any, after: Any, seconds: float = 0.0) -> None:
        current = self._open[-1] if self._open else -1
        if current >= 0:
            self.stages[current].hits += 1
        if self.keep_events:
            self._remember(before)
            self.events.append(TraceEvent(stage, rule, before, after, seconds, tuple(self._remember(after)),
                                          current))
        if self.echo:
            print(TraceEvent(stage, rule, before, after), file=sys.stderr)

    def fact(self, rule: RuleInfo) -> None:
        """A fact rule recorded its fact (no rewrite, so no step): it counts as a hit of the current stage."""
        if self._open:
            self.stages[self._open[-1]].facts += 1

    def _remember(self, root: Any) -> list:
        """The nodes under `root` not seen before (marking them seen); stops at seen ones, so a whole trace
        costs one visit per distinct node."""
        new, stack = [], [root]
        while stack:
            n = stack.pop()
            if n in self._seen or not hasattr(n, "src"):
                continue
            self._seen.add(n)
            new.append(n)
            stack.extend(n.src)
        return new

    def stat(self, rule: RuleInfo) -> RuleStat:
        st = self.stats.get(rule)
        if st is None:
            st = self.stats[rule] = RuleStat()
        return st

    def register(self, rules: Any) -> None:
        """Put every rule a rewrite may use in the table, tried or not."""
        for info in rules:
            self.stat(info)

    # ------------------------------------------------------------------ stages
    def stage_begin(self, pipeline: str, name: str, kind: str, loc: str, rules: tuple[str, ...], graph: Any,
                    matcher: Any = None) -> int:
        if self.keep_events:
            self._remember(graph)
        self.stages.append(StageRecord(pipeline, name, kind, loc, tuple(rules), graph, first_event=len(self.events),
                                       last_event=len(self.events), matcher=matcher))
        self._open.append(len(self.stages) - 1)
        return len(self.stages) - 1

    @property
    def in_stage(self) -> bool:
        return bool(self._open)

    def stage_end(self, index: int, graph: Any, seconds: float) -> None:
        rec = self.stages[index]
        rec.output, rec.seconds, rec.last_event = graph, seconds, len(self.events)
        if self.keep_events:
            self._remember(graph)
        if self._open and self._open[-1] == index:
            self._open.pop()

    # ------------------------------------------------------------------ kernels
    def kernel_compiled(self, name: str, ast: Any, device: str, seconds: float) -> None:
        rec = self.kernels.setdefault((ast, device), KernelRecord(name, ast, device))
        rec.compile_seconds += seconds

    def kernel_ran(self, name: str, ast: Any, device: str, seconds: float) -> None:
        rec = self.kernels.setdefault((ast, device), KernelRecord(name, ast, device))
        rec.runs += 1
        rec.run_seconds += seconds

    # ------------------------------------------------------------------ reports
    def dead_rules(self) -> list[RuleInfo]:
        """Rules that were available to a traced rewrite and never fired, in file order."""
        return sorted((info for info, st in self.stats.items() if st.hits == 0), key=lambda i: (i.loc, i.name))

    def report(self) -> str:
        """A table of rules by time spent, hottest first; rules that never fired last, marked dead."""
        rows = sorted(self.stats.items(), key=lambda kv: (kv[1].hits == 0, -kv[1].seconds))
        lines = [f"{'rule':48} {'location':36} {'tries':>8} {'hits':>7} {'ms':>9}"]
        for info, st in rows:
            lines.append(f"{info.ruleset + '/' + info.name:48.48} {info.loc:36.36} {st.tries:8d} {st.hits:7d} "
                         f"{st.seconds * 1e3:9.3f}" + ("  dead" if st.hits == 0 else ""))
        return "\n".join(lines)


_active: list[Trace] = []


def active_trace() -> Trace | None:
    return _active[-1] if _active else None


@contextmanager
def tracing(keep_events: bool = True, echo: bool = False) -> Iterator[Trace]:
    """Record every rewrite made inside the `with` block."""
    t = Trace(keep_events=keep_events, echo=echo)
    _active.append(t)
    try:
        yield t
    finally:
        _active.remove(t)


def _trace_from_environment(value: str) -> None:
    if value in ("", "0"):
        return
    if value.endswith(".json"):
        trace = Trace(keep_events=True)
        _active.append(trace)

        def write() -> None:
            from rulec.runtime.engine.trace_json import write_trace

            write_trace(trace, value)
            print(f"rulec: trace written to {value}", file=sys.stderr)

        atexit.register(write)
        return
    trace = Trace(keep_events=False, echo=value != "stats")
    _active.append(trace)
    atexit.register(lambda: print(f"rulec: rule statistics (RULEC_TRACE={value})\n{trace.report()}", file=sys.stderr))


_trace_from_environment(os.environ.get("RULEC_TRACE", ""))
