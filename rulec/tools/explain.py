"""`rulec explain RULE --at NODE PROG [ARGS...]`: why RULE did (not) rewrite NODE while PROG ran.

PROG runs with a full trace. NODE is a structural node id (as `rulec trace` prints them; a unique prefix
is enough), or an op name such as MAX when the stages holding the rule have one node with that op. For every stage whose rule sets hold RULE, the answer is one of:

* the node did not exist when this stage ran (and the stages where it did);
* the rule fired on it (the step);
* a rule earlier in the set fired on it first (which, where, and what it made);
* the deepest failing part of the pattern, and what was found there;
* the part of the guard that was false, with the values it read.
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from rulec.runtime.engine.node_ids import NodeIds
from rulec.tools.program import ProgramNotFound, add_program_arguments, run_traced
from rulec.tools.show_node import show

MIN_PREFIX = 4


class ExplainError(Exception):
    """A usage problem: an unknown or ambiguous rule or node."""


def rule_model(info: Any) -> Any:
    """The checked rule (rulec/model.py) behind a RuleInfo: the rule files of its project compiled again (rulec's
    own rules/ folder, or the folder of a user's rule file)."""
    project = _project_of(str(info.file))
    rs = project.rulesets.get(info.ruleset)
    rule = next((r for r in rs.rules if r.name == info.name), None) if rs is not None else None
    if rule is None:
        raise ExplainError(f"rule {info.ruleset}/{info.name} is no longer in {info.file} (edited since the build?)")
    return rule


@functools.lru_cache(maxsize=16)
def _project_of(file: str) -> Any:
    from rulec.compiler import compile_project
    from rulec.diagnostics import CompileError
    from rulec.runtime.resources import rules_dir

    path, own = Path(file).resolve(), rules_dir().resolve()
    root = own if own in path.parents else path.parent
    try:
        return compile_project([root])
    except CompileError as e:
        raise ExplainError(f"the rule files in {root} do not compile: {e.diagnostics[0].message}") from None


def stage_rules(rec: Any) -> list[Any]:
    """The rules a stage ran, in the order its matcher tries them (none for a call or egglog stage)."""
    return list(rec.matcher.rules) if rec.matcher is not None and rec.kind == "rules" else []


def namespace_of(matcher: Any, info: Any) -> dict[str, Any]:
    """The globals of the generated module that holds `info`'s matcher function (its helpers and names)."""
    for chain in matcher.dispatch.values():
        for rid, fn in chain:
            if matcher.rules[rid] == info:
                return fn.__globals__
    return {}


def find_rule(spec: str, trace: Any) -> Any:
    """The RuleInfo named `spec` (NAME or RULESET/NAME) among the rules of the stages that ran."""
    infos = {(i.ruleset, i.name): i for rec in trace.stages for i in stage_rules(rec)}
    infos.update({(i.ruleset, i.name): i for i in trace.stats})
    if "/" in spec:
        found = infos.get(tuple(spec.split("/", 1)))
        if found is None:
            raise ExplainError(f"no rule {spec!r} in the stages this program ran")
        return found
    named = sorted((k for k in infos if k[1] == spec))
    if not named:
        close = sorted({k[1] for k in infos if spec in k[1]})[:5]
        hint = f"; similar: {', '.join(close)}" if close else ""
        raise ExplainError(f"no rule named {spec!r} in the stages this program ran{hint}")
    if len(named) > 1:
        raise ExplainError(f"rule {spec!r} is in several rule sets: {', '.join('/'.join(k) for k in named)}; "
                           "write RULESET/NAME")
    return infos[named[0]]


def _stage_nodes(trace: Any, index: int) -> set[Any]:
    """Every node the stage held: its input graph, what its steps saw and made, and its output graph."""
    rec = trace.stages[index]
    roots = [rec.input, rec.output] + [x for ev in trace.events if ev.stage_index == index for x in (ev.before, ev.after)]
    out: set[Any] = set()
    for r in roots:
        if r is not None:
            out.update(r.toposort())
    return out


def _id_node(trace: Any, prefix: str, ids: NodeIds) -> Any:
    found: dict[str, Any] = {}
    for i in range(len(trace.stages)):
        for u in _stage_nodes(trace, i):
            if ids(u).startswith(prefix):
                found[ids(u)] = u
    if not found:
        raise ExplainError(f"no node {prefix!r} in any stage of this run (ids are printed by `rulec trace`)")
    if len(found) > 1:
        raise ExplainError(f"--at {prefix!r} is the prefix of several nodes ({', '.join(sorted(found)[:5])}); "
                           "give more characters")
    return next(iter(found.values()))


def _op_node(trace: Any, holding: list[int], op: str, ids: NodeIds, info: Any) -> Any:
    """The one node with op `op` that the rule rewrote, else in what the stages holding the rule returned (the
    nodes no rule rewrote further), else in everything those stages held, else in any stage."""
    outputs = lambda i: list(trace.stages[i].output.toposort()) if trace.stages[i].output is not None else []  # noqa: E731
    rewritten = lambda i: [ev.before for ev in trace.events if ev.stage_index == i and ev.rule == info]  # noqa: E731
    for nodes_of, stages in ((rewritten, holding), (outputs, holding), (lambda i: _stage_nodes(trace, i), holding),
                             (lambda i: _stage_nodes(trace, i), range(len(trace.stages)))):
        found = {ids(u): u for i in stages for u in nodes_of(i) if u.op.name == op}
        if len(found) == 1:
            return next(iter(found.values()))
        if len(found) > 1:
            listed = "\n".join(f"  {nid}  {show(u, ids, 1)}" for nid, u in sorted(found.items())[:10])
            more = f"\n  ... and {len(found) - 10} more" if len(found) > 10 else ""
            raise ExplainError(f"--at {op}: {len(found)} {op} nodes; give the id of one:\n{listed}{more}")
    raise ExplainError(f"--at {op}: no {op} node in any stage of this run")


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        return _explain(args)
    except ExplainError as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2


def _explain(args: argparse.Namespace) -> int:
    by_op = args.at.isupper() and args.at.replace("_", "").isalnum()
    if not by_op and len(args.at) < MIN_PREFIX:
        raise ExplainError(f"--at {args.at!r}: give a node id (such as n3fa9c01d7e42), at least {MIN_PREFIX} "
                           "characters of one, or an op name")
    try:
        result, trace = run_traced(args.file, args.args)
    except ProgramNotFound as e:
        raise ExplainError(str(e)) from None
    if result.status != 0:
        return result.status
    info = find_rule(args.rule, trace)
    rule = rule_model(info)
    ids = NodeIds()
    shown = lambda u: f"{ids(u)} {show(u, ids, 1)}"  # noqa: E731
    print(f"rule {info.ruleset}/{info.name}  {info.file}:{info.line}:{info.col}")
    holding = [i for i, rec in enumerate(trace.stages) if info in stage_rules(rec)]
    node = _op_node(trace, holding, args.at, ids, info) if by_op else _id_node(trace, args.at, ids)
    where = [i for i in range(len(trace.stages)) if node in _stage_nodes(trace, i)]
    print(f"node {shown(node)}")
    absent = [i for i in holding if i not in where]
    for i in holding:
        if i in where:
            _explain_stage(trace, i, rule, info, node, shown)
    if absent:
        names = ", ".join(f"{trace.stages[i].name} (stage {i + 1})" for i in absent)
        print(f"\nthe node did not exist when these stages holding the rule ran: {names}")
    if len(absent) == len(holding):
        seen_in = sorted({trace.stages[i].name for i in where})
        print(f"it exists only in stages that do not hold this rule: {', '.join(seen_in)}")
    return 0


def _explain_stage(trace: Any, i: int, rule: Any, info: Any, node: Any, shown: Any) -> None:
    from rulec.tools.why_not import explain_rule

    rec = trace.stages[i]
    where = f"{rec.pipeline} {rec.name}" if rec.pipeline else f"rewrite with {rec.name}"
    print(f"\n[{where}] (stage {i + 1} of {len(trace.stages)})")
    fired = [ev for ev in trace.events if ev.stage_index == i and ev.before is node]
    own = [ev for ev in fired if ev.rule == info]
    if own:
        print(f"  it fired: {shown(own[0].before)}\n       =>  {shown(own[0].after)}")
        return
    why = explain_rule(rule, node, namespace_of(rec.matcher, info), shown)
    order = stage_rules(rec)
    mine = order.index(info)
    earlier = [ev for ev in fired if ev.rule in order and order.index(ev.rule) < mine]
    if why.matched and why.guard_false is None and why.guard_error is None and earlier:
        ev = earlier[0]
        print(f"  the rule applies here, but a rule earlier in the set fired first: {ev.rule.ruleset}/{ev.rule.name} "
              f"({ev.rule.file}:{ev.rule.line}:{ev.rule.col}), making {shown(ev.after)}")
        return
    for line in why.lines(rule):
        print(f"  {line}")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    e = sub.add_parser("explain", help="why a rule did not rewrite a node while a program ran",
                       description="Run PROG with tracing on and explain why RULE did or did not rewrite NODE "
                                   "in each stage that holds RULE.")
    e.add_argument("rule", metavar="RULE", help="rule name, or RULESET/NAME")
    e.add_argument("--at", required=True, metavar="NODE", help="structural node id (from `rulec trace`), a unique "
                                                               "prefix of one, or an op name (when one node has it)")
    add_program_arguments(e)
    e.set_defaults(func=cmd_explain)
    return e
