"""`rulec why NODE PROG [ARGS...]`: the chain of rewrites that produced NODE from the program's tensor graph.

PROG runs with a full trace (or PROG is a trace file, FILE.json, which is read); the answer is computed from
the trace format. The step that first made NODE (NODE is among the nodes it created) is found;
its `before` node was in turn made by an earlier step, or rebuilt by the engine around a source a step made
(the chain follows that source), or was already in the tensor graph the first stage was given. The chain is printed from the tensor graph to NODE, one rule per line with its location.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from rulec.tools.program import add_program_arguments
from rulec.runtime.engine.trace_json import reachable
from rulec.tools.show_node import show_json
from rulec.tools.trace_cmd import traced_data

MAX_CHAIN = 500  # a provenance chain longer than this is cut (and says so)


def provenance(data: dict[str, Any], node: str) -> tuple[list[tuple[Any, dict]], str]:
    """The steps that led to `node` in a trace (the trace format), oldest first, each with its stage (None for a
    rewrite outside any stage), and the node the chain starts from."""
    nodes = data["nodes"]
    made_by: dict[str, tuple[Any, dict]] = {}
    for st in data["stages"]:
        for step in st["steps"]:
            for n in step["new"]:
                made_by.setdefault(n, (st, step))
    for step in data["steps"]:
        for n in step["new"]:
            made_by.setdefault(n, (None, step))

    def rebuilt(n: str, depth: int = 3) -> bool:
        return depth > 0 and any(s in made_by or rebuilt(s, depth - 1) for s in nodes[n]["src"])

    chain: list[tuple[Any, dict]] = []
    current, seen = node, set()
    while len(chain) < MAX_CHAIN and current not in seen:
        seen.add(current)
        if current in made_by:
            chain.append(made_by[current])
            current = made_by[current][1]["before"]
            continue
        # a node the engine rebuilt because a source changed: follow the source a rule made
        changed = [s for s in nodes[current]["src"] if s in made_by or rebuilt(s)]
        if not changed:
            break
        current = changed[0]
    return chain[::-1], current


def cmd_why(args: argparse.Namespace) -> int:
    status, data = traced_data(args.file, args.args)
    if data is None:
        return status
    nodes, rules = data["nodes"], data["rules"]
    matches = [n for n in nodes if n.startswith(args.node)]
    if len(args.node) < 4 or not matches:
        print(f"rulec: error: no node {args.node!r} in this run (ids are printed by `rulec trace`)", file=sys.stderr)
        return 2
    if len(matches) > 1:
        print(f"rulec: error: {args.node!r} is the prefix of {len(matches)} nodes; give more characters", file=sys.stderr)
        return 2
    node = matches[0]
    chain, origin = provenance(data, node)
    print(f"node {node}  {show_json(nodes, node, 1)}")
    if not chain:
        first = data["stages"][0]["input"] if data["stages"] else None
        if first is not None and node in reachable(nodes, first):
            print("it is part of the program's tensor graph: no rule made it")
        else:
            print("no rule made it: it was made by a Python step (a `call:` stage) or an egglog stage, which "
                  "record their input and output graphs only")
        return 0
    print(f"made from {origin}  {show_json(nodes, origin, 1)}")
    for k, (st, step) in enumerate(chain, 1):
        rule = rules[step["rule"]]
        where = f"{st['pipeline']} {st['name']}" if st is not None and st["pipeline"] else \
            f"rewrite with {st['name'] if st is not None else rule['ruleset']}"
        print(f"{k:3}. [{where}] {rule['id']}  {rule['file']}:{rule['line']}:{rule['col']}")
        print(f"       -> {step['after']}  {show_json(nodes, step['after'], 1)}")
    if len(chain) >= MAX_CHAIN:
        print(f"(the chain is cut at {MAX_CHAIN} steps)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    w = sub.add_parser("why", help="the chain of rules that produced a node",
                       description="Run PROG with tracing on and print the rewrites that produced NODE from the "
                                   "program's tensor graph, oldest first.")
    w.add_argument("node", metavar="NODE", help="structural node id (from `rulec trace`), or a unique prefix")
    add_program_arguments(w, traces=True)
    w.set_defaults(func=cmd_why)
    return w
