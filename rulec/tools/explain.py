"""`rulec explain RULE --at NODE PROG [ARGS...]`: why RULE did (not) rewrite NODE while PROG ran.

PROG runs with a full trace. NODE is a structural node id (as `rulec trace` prints them; a unique prefix
is enough). For every stage whose rule sets hold RULE, the answer is one of:

* the node did not exist when this stage ran (and the stages where it did);
* the rule fired on it (the step);
* a rule earlier in the set fired on it first (which, where, and what it made);
* the deepest failing part of the pattern, and what was found there;
* the part of the guard that was false, with the values it read.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from rulec.runtime.engine.node_ids import NodeIds
from rulec.tools.program import ProgramNotFound, run_traced
from rulec.tools.show_node import show

MIN_PREFIX = 4


class ExplainError(Exception):
    """A usage problem: an unknown or ambiguous rule or node."""


def _pipeline(label: str) -> Any:
    from rulec.runtime.resources import rules_dir
    from rulec.runtime.schedule.pipeline import load_pipeline

    folder, _, name = label.partition("/")
    return load_pipeline(rules_dir() / folder / name)


def _rule_models() -> dict[tuple[str, str], Any]:
    """The checked rules of rulec's rule files, by (rule set, name): as written, with their patterns."""
    from rulec.compiler import compile_project
    from rulec.runtime.resources import rules_dir

    project = compile_project([rules_dir()])
    out: dict[tuple[str, str], Any] = {}
    for set_name, rs in project.rulesets.items():
        for rule in rs.rules:
            out.setdefault((set_name, rule.name), rule)
    return out


def find_rule(spec: str, models: dict[tuple[str, str], Any]) -> tuple[str, str]:
    if "/" in spec:
        key = tuple(spec.split("/", 1))
        if key not in models:
            raise ExplainError(f"no rule {spec!r}")
        return key  # type: ignore[return-value]
    found = sorted(k for k in models if k[1] == spec)
    if not found:
        close = sorted({k[1] for k in models if spec in k[1]})[:5]
        hint = f"; similar: {', '.join(close)}" if close else ""
        raise ExplainError(f"no rule named {spec!r}{hint}")
    if len(found) > 1:
        raise ExplainError(f"rule {spec!r} is in several rule sets: {', '.join('/'.join(k) for k in found)}; "
                           "write RULESET/NAME")
    return found[0]


def _stage_nodes(trace: Any, index: int) -> set[Any]:
    """Every node the stage held: its input graph, what its steps saw and made, and its output graph."""
    rec = trace.stages[index]
    roots = [rec.input, rec.output] + [x for ev in trace.events if ev.stage_index == index for x in (ev.before, ev.after)]
    out: set[Any] = set()
    for r in roots:
        if r is not None:
            out.update(r.toposort())
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        return _explain(args)
    except ExplainError as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2


def _explain(args: argparse.Namespace) -> int:
    models = _rule_models()
    ruleset, name = find_rule(args.rule, models)
    rule = models[(ruleset, name)]
    if len(args.at) < MIN_PREFIX:
        raise ExplainError(f"--at {args.at!r}: give a node id (such as n3fa9c01d7e42) or at least {MIN_PREFIX} "
                           "characters of one")
    try:
        result, trace = run_traced(args.file, args.args)
    except ProgramNotFound as e:
        raise ExplainError(str(e)) from None
    if result.status != 0:
        return result.status
    ids = NodeIds()
    shown = lambda u: f"{ids(u)} {show(u, ids, 1)}"  # noqa: E731
    print(f"rule {ruleset}/{name}  {rule.loc.file}:{rule.loc.line}:{rule.loc.col}")
    holding = [i for i, rec in enumerate(trace.stages) if rec.kind == "rules" and
               any(info.ruleset == ruleset and info.name == name
                   for n in rec.rules for info in _pipeline(rec.pipeline).ruleset(n).rules)]
    if not holding:
        print(f"no stage that ran holds this rule (its set {ruleset!r} is not in the stages this program ran)")
        return 0
    node, where = None, []
    for i, rec in enumerate(trace.stages):
        for u in _stage_nodes(trace, i):
            if ids(u).startswith(args.at):
                if node is not None and u is not node:
                    raise ExplainError(f"--at {args.at!r} is the prefix of several nodes ({ids(node)}, {ids(u)}); "
                                       "give more characters")
                node = u
                where.append(i)
                break
    if node is None:
        raise ExplainError(f"no node {args.at!r} in any stage of this run (ids are printed by `rulec trace`)")
    print(f"node {shown(node)}")
    absent = [i for i in holding if i not in where]
    for i in holding:
        if i in where:
            _explain_stage(trace, i, rule, ruleset, name, node, shown)
    if absent:
        names = ", ".join(f"{trace.stages[i].name} (stage {i + 1})" for i in absent)
        print(f"\nthe node did not exist when these stages holding the rule ran: {names}")
    if len(absent) == len(holding):
        seen_in = sorted({trace.stages[i].name for i in where})
        print(f"it exists only in stages that do not hold this rule: {', '.join(seen_in)}")
    return 0


def _explain_stage(trace: Any, i: int, rule: Any, ruleset: str, name: str, node: Any, shown: Any) -> None:
    from rulec.tools.why_not import explain_rule

    rec = trace.stages[i]
    print(f"\n[{rec.pipeline} {rec.name}] (stage {i + 1} of {len(trace.stages)})")
    fired = [ev for ev in trace.events if ev.stage_index == i and ev.before is node]
    own = [ev for ev in fired if ev.rule.ruleset == ruleset and ev.rule.name == name]
    if own:
        print(f"  it fired: {shown(own[0].before)}\n       =>  {shown(own[0].after)}")
        return
    pipe = _pipeline(rec.pipeline)
    why = explain_rule(rule, node, _namespace(pipe.ruleset(ruleset)), shown)
    order = [info for n in rec.rules for info in pipe.ruleset(n).rules]
    mine = next(k for k, info in enumerate(order) if info.ruleset == ruleset and info.name == name)
    earlier = [ev for ev in fired if ev.rule in order and order.index(ev.rule) < mine]
    if why.matched and why.guard_false is None and why.guard_error is None and earlier:
        ev = earlier[0]
        print(f"  the rule applies here, but a rule earlier in the set fired first: {ev.rule.ruleset}/{ev.rule.name} "
              f"({ev.rule.file}:{ev.rule.line}:{ev.rule.col}), making {shown(ev.after)}")
        return
    for line in why.lines(rule):
        print(f"  {line}")


def _namespace(ruleset: Any) -> dict[str, Any]:
    """The generated module's globals, where the guard's helpers and names live."""
    for chain in ruleset.matcher.dispatch.values():
        for _, fn in chain:
            return fn.__globals__
    return {}


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    e = sub.add_parser("explain", help="why a rule did not rewrite a node while a program ran",
                       description="Run PROG with tracing on and explain why RULE did or did not rewrite NODE "
                                   "in each stage that holds RULE.")
    e.add_argument("rule", metavar="RULE", help="rule name, or RULESET/NAME")
    e.add_argument("--at", required=True, metavar="NODE", help="structural node id (from `rulec trace`), or a "
                                                               "unique prefix of one")
    e.add_argument("file", metavar="PROG", help="the script to run")
    e.add_argument("args", nargs="*", metavar="ARGS", help="arguments for the script (after `--` when they start with -)")
    e.set_defaults(func=cmd_explain)
    return e
