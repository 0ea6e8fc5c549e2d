"""`rulec stats PROG... [--fail-on-dead]`: hit counts and time per rule and per stage over a corpus of
programs. Every kernel is also lowered and rendered for all four languages, so the GPU lowering rules
count too. Every rule of every rule set the pipelines use is listed, so a rule no program exercises
shows with 0 hits; --fail-on-dead makes that an error (exit 1) naming each such rule by file:line.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

from rich.table import Table

from rulec.tools.program import ProgramNotFound, run_traced
from rulec.tools.summary import LiveCount, console as summary_console

LANGUAGES = ("c", "opencl", "cuda", "metal")


class _RenderAll:
    """A realize watcher: renders each kernel in every language (lowering it for the CPU and GPU targets)."""

    def __init__(self) -> None:
        self.done: set[Any] = set()

    def before_realize(self, tensors: tuple[Any, ...]) -> None:
        pass

    def after_realize(self, tensors: tuple[Any, ...], items: list[Any]) -> None:
        from rulec.runtime.ir.ops import Ops

        for item in items:
            if item.ast in self.done or (item.ast.op is Ops.STORE and item.ast.src[1].op is Ops.COPY):
                continue
            self.done.add(item.ast)
            for language in LANGUAGES:
                item.render(language)


def pipeline_rules() -> list[Any]:
    """Every rule of every rule set that rulec's pipelines (schedule and codegen) run or hand to callbacks."""
    from rulec.runtime.codegen.lower import PIPELINES
    from rulec.runtime.resources import rules_dir
    from rulec.runtime.schedule.pipeline import load_pipeline

    pipes = [load_pipeline()] + [load_pipeline(rules_dir() / "codegen" / f) for f in PIPELINES.values()]
    rules: list[Any] = []
    seen: set[str] = set()
    for pipe in pipes:
        for name in [n for st in pipe.stages for n in st.rules] + list(pipe.matchers):
            if name not in seen:
                seen.add(name)
                rules.extend(pipe.ruleset(name).matcher.rules)
    return rules


def cmd_stats(args: argparse.Namespace) -> int:
    from rulec.runtime.engine.trace import RuleStat
    from rulec.runtime.tensor import realize

    console = summary_console()
    totals: dict[Any, RuleStat] = {info: RuleStat() for info in pipeline_rules()}
    programs: dict[Any, int] = defaultdict(int)
    stages: dict[tuple[str, str], list[float]] = {}
    watcher = _RenderAll()
    realize.WATCHERS.append(watcher)
    try:
        for k, prog in enumerate(args.programs, 1):
            try:
                with LiveCount(summary_console(stderr=True), f"running {k}/{len(args.programs)}: {prog}"):
                    result, trace = run_traced(prog, [], keep_events=False)
            except ProgramNotFound as e:
                print(f"rulec: error: {e}", file=sys.stderr)
                return 2
            if result.status != 0:
                print(f"rulec: error: {prog} failed (status {result.status}); statistics need every program to run",
                      file=sys.stderr)
                return result.status
            for info, st in trace.stats.items():
                tot = totals.setdefault(info, RuleStat())
                tot.tries += st.tries
                tot.hits += st.hits
                tot.seconds += st.seconds
                if st.hits:
                    programs[info] += 1
            for rec in trace.stages:
                row = stages.setdefault((rec.pipeline, rec.name), [0, 0, 0.0])
                row[0] += 1
                row[1] += rec.hits
                row[2] += rec.seconds
    finally:
        realize.WATCHERS.remove(watcher)
    n = len(args.programs)
    if not args.quiet:
        st_table = Table(title=f"stages over {n} program(s)", title_justify="left")
        for col in ("pipeline", "stage", "runs", "rule hits", "ms"):
            st_table.add_column(col, justify="left" if col in ("pipeline", "stage") else "right")
        for (pipeline, name), (runs, hits, secs) in stages.items():
            st_table.add_row(pipeline, name, str(runs), str(hits), f"{secs * 1e3:.1f}")
        console.print(st_table)
        rule_table = Table(title=f"rules over {n} program(s), most time first", title_justify="left")
        for col in ("rule", "location", "tries", "hits", "programs", "ms"):
            rule_table.add_column(col, justify="left" if col in ("rule", "location") else "right")
        for info, st in sorted(totals.items(), key=lambda kv: (kv[1].hits == 0, -kv[1].seconds, kv[0].loc)):
            rule_table.add_row(f"{info.ruleset}/{info.name}", f"{info.file}:{info.line}", str(st.tries),
                               str(st.hits) if st.hits else "[red]0 (dead)", f"{programs[info]}/{n}",
                               f"{st.seconds * 1e3:.2f}")
        console.print(rule_table)
    dead = sorted((info for info, st in totals.items() if st.hits == 0), key=lambda i: (i.file, i.line))
    if args.fail_on_dead and dead:
        for info in dead:  # one line each, file:line first, as compilers print errors
            print(f"{info.file}:{info.line}: error: rule {info.ruleset}/{info.name} fired on none of the "
                  f"{n} program(s)", file=sys.stderr)
        print(f"rulec: {len(dead)} dead rule(s)", file=sys.stderr)
        return 1
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = sub.add_parser("stats", help="rule and stage statistics over a corpus of programs",
                       description="Run each PROG (a Python script using rulec.Tensor) and report hit counts and "
                                   "time per rule and per stage, summed over all of them.")
    s.add_argument("programs", nargs="+", metavar="PROG", help="scripts to run")
    s.add_argument("--fail-on-dead", action="store_true",
                   help="exit 1 and name each rule (file:line) that fired on no program")
    s.add_argument("-q", "--quiet", action="store_true", help="no tables (errors only)")
    s.set_defaults(func=cmd_stats)
    return s
