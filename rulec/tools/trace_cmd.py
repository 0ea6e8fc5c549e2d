"""`rulec trace PROG [ARGS...] [--stage S] [--rule R] [--json]`: every rewrite a script's tensors went
through, in order: the stage, the rule with its file:line:col, and the node before and after.

With --json the whole trace is written in the trace format (runtime/engine/trace_json.py) instead.
"""
from __future__ import annotations

import argparse
import json
import sys

from rulec.runtime.engine.node_ids import NodeIds
from rulec.runtime.engine.trace_json import to_json
from rulec.tools.program import ProgramNotFound, run_traced
from rulec.tools.show_node import show


def _rule_matches(pattern: str, ruleset: str, name: str) -> bool:
    return pattern in (name, f"{ruleset}/{name}", ruleset)


def cmd_trace(args: argparse.Namespace) -> int:
    try:
        result, trace = run_traced(args.file, args.args)
    except ProgramNotFound as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    if result.status != 0:
        return result.status
    if args.json:
        data = to_json(trace, program=args.file)
        text = json.dumps(data, separators=(",", ":"))
        if args.output:
            with open(args.output, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text + "\n")
        return 0
    ids = NodeIds()
    shown = 0
    for ev in trace.events:
        rec = trace.stages[ev.stage_index] if ev.stage_index >= 0 else None
        stage = rec.name if rec is not None else ev.stage
        if args.stage is not None and args.stage != stage:
            continue
        if args.rule is not None and not _rule_matches(args.rule, ev.rule.ruleset, ev.rule.name):
            continue
        shown += 1
        where = f"{ev.rule.file}:{ev.rule.line}:{ev.rule.col}"
        label = f"{rec.pipeline} {stage}" if rec is not None and rec.pipeline else f"rewrite with {stage}"
        print(f"#{shown} [{label}] {ev.rule.ruleset}/{ev.rule.name}  {where}")
        print(f"    before {ids(ev.before)}  {show(ev.before, ids, args.depth)}")
        print(f"    after  {ids(ev.after)}  {show(ev.after, ids, args.depth)}")
    if shown == 0:
        what = " and ".join(x for x in (args.stage and f"stage {args.stage!r}", args.rule and f"rule {args.rule!r}") if x)
        print(f"rulec: no rewrites{' for ' + what if what else ''}", file=sys.stderr)
        stages = sorted({r.name for r in trace.stages})
        if args.stage is not None and args.stage not in stages:
            print(f"rulec: note: the stages that ran: {', '.join(stages)}", file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    t = sub.add_parser("trace", help="run a script and show every rewrite, in order",
                       description="Run PROG (a Python script using rulec.Tensor) with tracing on and print each "
                                   "rewrite: stage, rule, rule location, node before and after.")
    t.add_argument("--stage", metavar="S", help="only the rewrites of the stage named S")
    t.add_argument("--rule", metavar="R", help="only the rewrites by rule R (a name, or RULESET/NAME, or a rule set)")
    t.add_argument("--json", action="store_true", help="write the whole trace as JSON (the trace format)")
    t.add_argument("-o", "--output", metavar="FILE", help="with --json: write to FILE instead of stdout")
    t.add_argument("--depth", type=int, default=1, metavar="N", help="levels of sources shown per node (default 1)")
    t.add_argument("file", metavar="PROG", help="the script to run")
    t.add_argument("args", nargs="*", metavar="ARGS", help="arguments for the script (after `--` when they start with -)")
    t.set_defaults(func=cmd_trace)
    return t
