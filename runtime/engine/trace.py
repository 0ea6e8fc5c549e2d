"""Rewrite tracing: which rule fired where, and per-rule hit counts and time.

Turn it on with the environment variable RULEC_TRACE=1 (events are printed to
stderr as they happen, and the per-rule table when the process exits),
RULEC_TRACE=stats (the table only), or from Python with `with tracing() as t: ...`.
Every rule of every rule set a traced rewrite runs is in the table, so a rule
that never fired shows with 0 hits.
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
    stage: str
    rule: RuleInfo
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"[{self.stage}] {self.rule.name} ({self.rule.loc}): {_short(self.before)}  =>  {_short(self.after)}"


def _short(u: Any, limit: int = 160) -> str:
    text = " ".join(repr(u).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Trace:
    """Everything recorded while a trace was active."""

    keep_events: bool = True
    echo: bool = False
    events: list[TraceEvent] = field(default_factory=list)
    stats: dict[RuleInfo, RuleStat] = field(default_factory=dict)

    def record(self, stage: str, rule: RuleInfo, before: Any, after: Any) -> None:
        ev = TraceEvent(stage, rule, before, after)
        if self.keep_events:
            self.events.append(ev)
        if self.echo:
            print(ev, file=sys.stderr)

    def stat(self, rule: RuleInfo) -> RuleStat:
        st = self.stats.get(rule)
        if st is None:
            st = self.stats[rule] = RuleStat()
        return st

    def register(self, rules: Any) -> None:
        """Put every rule a rewrite may use in the table, tried or not."""
        for info in rules:
            self.stat(info)

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
    trace = Trace(keep_events=False, echo=value != "stats")
    _active.append(trace)
    atexit.register(lambda: print(f"rulec: rule statistics (RULEC_TRACE={value})\n{trace.report()}", file=sys.stderr))


_trace_from_environment(os.environ.get("RULEC_TRACE", ""))
