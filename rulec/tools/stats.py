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
        for item in items:
            if item.ast in self.done or item.is_copy:
                continue
            self.done.add(item.ast)
            render_all(item)


def render_all(item: Any) -> str | None:
    """Render `item` in every language (so the lowering rules of every target run); returns the C source.
    A language that cannot express the kernel (Metal has no float64) is skipped: that is no error of the
    program's."""
    from rulec.backends.render import RenderError

    c_source = None
    for language in LANGUAGES:
        try:
            text = item.render(language)
        except RenderError:
            continue
        if language == "c":
            c_source = text
    return c_source


def pipeline_rules() -> list[Any]:
    """Every rule of every rule set that rulec's pipelines (schedule and codegen) run or hand to callbacks."""
    from rulec.runtime.codegen.lower import PIPELINES
    from rulec.runtime.resources import rules_dir
    from rulec.runtime.engine.pipeline import load_pipeline
    from rulec.runtime.schedule.scheduler import schedule_pipeline

    pipes = [schedule_pipeline()] + [load_pipeline(rules_dir() / "codegen" / f) for f in PIPELINES.values()]
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
                row[1] += rec.hits + rec.facts
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
    if not args.fail_on_dead:
        return 0
    try:
        allowed = read_allowed(args.allow_dead) if args.allow_dead else {}
    except AllowListError as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    ids = {f"{i.ruleset}/{i.name}": i for i in totals}
    problems = 0
    for rule, (line, _) in sorted(allowed.items(), key=lambda kv: kv[1][0]):
        info = ids.get(rule)
        if info is None:
            print(f"{args.allow_dead}:{line}: error: {rule} is not a rule of the pipelines", file=sys.stderr)
            problems += 1
        elif totals[info].hits:
            print(f"{args.allow_dead}:{line}: error: {rule} is listed as dead but fired on {programs[info]} of the "
                  f"{n} program(s): remove it from the list", file=sys.stderr)
            problems += 1
    unexpected = [info for info in dead if f"{info.ruleset}/{info.name}" not in allowed]
    for info in unexpected:  # one line each, file:line first, as compilers print errors
        print(f"{info.file}:{info.line}: error: rule {info.ruleset}/{info.name} fired on none of the "
              f"{n} program(s)", file=sys.stderr)
    if unexpected or problems:
        listed = f" ({len(dead) - len(unexpected)} more listed in {args.allow_dead})" if args.allow_dead else ""
        print(f"rulec: {len(unexpected)} dead rule(s){listed}", file=sys.stderr)
        return 1
    return 0


class AllowListError(ValueError):
    """An --allow-dead file that cannot be read, or a line without a rule and a reason."""


def read_allowed(path: str) -> dict[str, tuple[int, str]]:
    """`RULESET/NAME  # why it fires on no program` per line (blank lines and lines starting with # are
    skipped): the rules expected to be dead, each with its reason."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise AllowListError(f"--allow-dead {path}: {e.strerror}") from None
    out: dict[str, tuple[int, str]] = {}
    for k, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        rule, _, why = line.partition("#")
        rule, why = rule.strip(), why.strip()
        if "/" not in rule or " " in rule or not why:
            raise AllowListError(f"{path}:{k}: expected `RULESET/NAME  # reason`, got {raw.strip()!r}")
        out[rule] = (k, why)
    return out


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = sub.add_parser("stats", help="rule and stage statistics over a corpus of programs",
                       description="Run each PROG (a Python script using rulec.Tensor) and report hit counts and "
                                   "time per rule and per stage, summed over all of them.")
    s.add_argument("programs", nargs="+", metavar="PROG", help="scripts to run")
    s.add_argument("--fail-on-dead", action="store_true",
                   help="exit 1 and name each rule (file:line) that fired on no program")
    s.add_argument("--allow-dead", metavar="FILE",
                   help="with --fail-on-dead: rules expected to fire on no program, one `RULESET/NAME  # reason` "
                        "per line; a listed rule that fires is an error too (the list stays true)")
    s.add_argument("-q", "--quiet", action="store_true", help="no tables (errors only)")
    s.set_defaults(func=cmd_stats)
    return s
