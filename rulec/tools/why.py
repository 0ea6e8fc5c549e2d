"""`rulec why NODE PROG [ARGS...]`: the chain of rewrites that produced NODE from the program's tensor graph.

PROG runs with a full trace. The step that first made NODE (NODE is among the nodes it created) is found;
its `before` node was in turn made by an earlier step, or rebuilt by the engine around a source a step made
(the chain follows that source), or was already in the tensor graph the first stage was given. The chain is printed from the tensor graph to NODE, one rule per line with its location.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from rulec.runtime.engine.node_ids import NodeIds
from rulec.tools.program import ProgramNotFound, run_traced
from rulec.tools.show_node import show

MAX_CHAIN = 500  # a provenance chain longer than this is cut (and says so)


def provenance(trace: Any, node: Any) -> tuple[list[Any], Any]:
    """The steps that led to `node`, oldest first, and the node of the program's graph the chain starts from
    (None when `node` was made by a Python step, a call stage, whose inputs are not recorded per node)."""
    made_by: dict[Any, Any] = {}
    for ev in trace.events:
        for n in ev.new:
            made_by.setdefault(n, ev)
    chain: list[Any] = []
    current = node
    seen: set[Any] = set()
    while len(chain) < MAX_CHAIN and current not in seen:
        seen.add(current)
        ev = made_by.get(current)
        if ev is not None:
            chain.append(ev)
            current = ev.before
            continue
        # a node the engine rebuilt because a source changed: follow the source a rule made
        changed = [s for s in current.src if s in made_by or _rebuilt(s, made_by)]
        if not changed:
            break
        current = changed[0]
    return chain[::-1], current


def _rebuilt(node: Any, made_by: dict[Any, Any], depth: int = 3) -> bool:
    return depth > 0 and any(s in made_by or _rebuilt(s, made_by, depth - 1) for s in node.src)


def cmd_why(args: argparse.Namespace) -> int:
    try:
        result, trace = run_traced(args.file, args.args)
    except ProgramNotFound as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    if result.status != 0:
        return result.status
    ids = NodeIds()
    candidates = {n for ev in trace.events for n in (ev.before, ev.after, *ev.new)}
    for rec in trace.stages:
        for root in (rec.input, rec.output):
            if root is not None:
                candidates.update(root.toposort())
    for rec in trace.kernels.values():
        candidates.update(rec.ast.toposort())
    matches = {n for n in candidates if ids(n).startswith(args.node)}
    if len(args.node) < 4 or not matches:
        print(f"rulec: error: no node {args.node!r} in this run (ids are printed by `rulec trace`)", file=sys.stderr)
        return 2
    if len(matches) > 1:
        print(f"rulec: error: {args.node!r} is the prefix of {len(matches)} nodes; give more characters", file=sys.stderr)
        return 2
    node = matches.pop()
    chain, origin = provenance(trace, node)
    print(f"node {ids(node)}  {show(node, ids, 1)}")
    if not chain:
        first = trace.stages[0].input if trace.stages else None
        if first is not None and node in first.toposort():
            print("it is part of the program's tensor graph: no rule made it")
        else:
            print("no rule made it: it was made by a Python step (a `call:` stage) or an egglog stage, which "
                  "record their input and output graphs only")
        return 0
    print(f"made from {ids(origin)}  {show(origin, ids, 1)}")
    for k, ev in enumerate(chain, 1):
        stage = trace.stages[ev.stage_index] if ev.stage_index >= 0 else None
        where = f"{stage.pipeline} {stage.name}" if stage is not None else ev.stage
        print(f"{k:3}. [{where}] {ev.rule.ruleset}/{ev.rule.name}  {ev.rule.file}:{ev.rule.line}:{ev.rule.col}")
        print(f"       -> {ids(ev.after)}  {show(ev.after, ids, 1)}")
    if len(chain) >= MAX_CHAIN:
        print(f"(the chain is cut at {MAX_CHAIN} steps)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    w = sub.add_parser("why", help="the chain of rules that produced a node",
                       description="Run PROG with tracing on and print the rewrites that produced NODE from the "
                                   "program's tensor graph, oldest first.")
    w.add_argument("node", metavar="NODE", help="structural node id (from `rulec trace`), or a unique prefix")
    w.add_argument("file", metavar="PROG", help="the script to run")
    w.add_argument("args", nargs="*", metavar="ARGS", help="arguments for the script (after `--` when they start with -)")
    w.set_defaults(func=cmd_why)
    return w
