"""`rulec trace PROG [ARGS...] [--stage S] [--rule R] [--json]`: every rewrite a script's tensors went
through, in order: the stage, the rule with its file:line:col, and the node before and after.

With --json the whole trace is written in the trace format (runtime/engine/trace_json.py) instead. PROG may
also be a trace file (`FILE.json`, from `--json` or `RULEC_TRACE=FILE.json`): it is read, not run. Either
way the listing is printed from the trace format, the one every tool reads.
"""
from __future__ import annotations

import argparse
import json
import sys

from typing import Any

from rulec.runtime.engine.trace_json import TraceFormatError, load_trace, to_json
from rulec.tools.program import ProgramNotFound, add_program_arguments, run_traced
from rulec.tools.show_node import show_json


def _rule_matches(pattern: str, ruleset: str, name: str) -> bool:
    return pattern in (name, f"{ruleset}/{name}", ruleset)


def traced_data(file: str, argv: list[str]) -> tuple[int, dict[str, Any] | None]:
    """The trace of `file` in the trace format: read from it when it is a trace file (`.json`), else recorded
    by running it. Returns (status, trace); a status other than 0 means there is nothing to show."""
    if file.endswith(".json"):
        try:
            return 0, load_trace(file)
        except TraceFormatError as e:
            print(f"rulec: error: {e}", file=sys.stderr)
            return 2, None
    try:
        result, trace = run_traced(file, argv)
    except ProgramNotFound as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2, None
    if result.status != 0:
        return result.status, None
    return 0, to_json(trace, program=file)


def cmd_trace(args: argparse.Namespace) -> int:
    status, data = traced_data(args.file, args.args)
    if data is None:
        return status
    if args.json:
        text = json.dumps(data, separators=(",", ":"))
        if args.output:
            with open(args.output, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text + "\n")
        return 0
    nodes, rules = data["nodes"], data["rules"]
    steps = [(st, step) for st in data["stages"] for step in st["steps"]] + [(None, step) for step in data["steps"]]
    shown = 0
    for st, step in steps:
        rule = rules[step["rule"]]
        stage = st["name"] if st is not None else rule["ruleset"]
        if args.stage is not None and args.stage != stage:
            continue
        if args.rule is not None and not _rule_matches(args.rule, rule["ruleset"], rule["name"]):
            continue
        shown += 1
        label = f"{st['pipeline']} {stage}" if st is not None and st["pipeline"] else f"rewrite with {stage}"
        print(f"#{shown} [{label}] {rule['id']}  {rule['file']}:{rule['line']}:{rule['col']}")
        print(f"    before {step['before']}  {show_json(nodes, step['before'], args.depth)}")
        print(f"    after  {step['after']}  {show_json(nodes, step['after'], args.depth)}")
    if shown == 0:
        what = " and ".join(x for x in (args.stage and f"stage {args.stage!r}", args.rule and f"rule {args.rule!r}") if x)
        print(f"rulec: no rewrites{' for ' + what if what else ''}", file=sys.stderr)
        names = sorted({st["name"] for st in data["stages"]})
        if args.stage is not None and args.stage not in names:
            print(f"rulec: note: the stages that ran: {', '.join(names)}", file=sys.stderr)
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
    add_program_arguments(t, traces=True)
    t.set_defaults(func=cmd_trace)
    return t
