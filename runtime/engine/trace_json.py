"""The trace file format (version 1): one JSON document that `RULEC_TRACE=FILE.json`, `rulec trace --json`
and the explorer write, and that every trace tool reads.

    {"format": "rulec-trace", "version": 1,
     "program": "examples/mlp.py",                 # what was traced (free text)
     "rules":   [{"id": "symbolic/add-zero", "ruleset", "name", "file", "line", "col", "kind",
                  "tries", "hits", "seconds"}, ...],
     "stages":  [{"pipeline": "schedule/pipeline.yaml", "name", "kind": "rules"|"egglog"|"call",
                  "loc", "rules": [...], "input": ID, "output": ID, "seconds", "hits", "facts",
                  "steps": [STEP, ...]}, ...],
     "steps":   [STEP, ...],                       # rewrites made outside any pipeline stage
     "kernels": [{"name", "device", "ast": ID, "compile_seconds", "runs", "run_seconds"}, ...],
     "nodes":   {ID: {"op", "dtype", "arg", "tag", "src": [ID, ...]}, ...}}

    STEP = {"rule": INDEX into "rules", "before": ID, "after": ID, "new": [ID, ...], "seconds"}

`trace` is a runtime.engine.trace.Trace (not imported here: the trace module imports this one to write
RULEC_TRACE=FILE.json). IDs are structural (runtime/engine/node_ids.py): the same node has the same id in every stage and every
run. "new" lists the nodes of "after" that no earlier step or stage held. "nodes" holds every node any
stage, step or kernel refers to, so each graph can be drawn from the file alone.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rulec.runtime.engine.node_ids import NodeIds

TRACE_FORMAT = "rulec-trace"
TRACE_VERSION = 1
ARG_TEXT_LIMIT = 300


class TraceFormatError(ValueError):
    """A file that is not a rulec trace of a version this rulec reads."""


def to_json(trace: Any, program: str = "") -> dict[str, Any]:
    ids = NodeIds()
    nodes: dict[str, dict[str, Any]] = {}

    def name(root: Any) -> str | None:
        if root is None:
            return None
        rid = ids(root)
        if rid not in nodes:
            _add_nodes(root, ids, nodes)
        return rid

    rules: list[dict[str, Any]] = []
    rule_index: dict[Any, int] = {}
    for info, st in trace.stats.items():
        rule_index[info] = len(rules)
        rules.append({"id": f"{info.ruleset}/{info.name}", "ruleset": info.ruleset, "name": info.name,
                      "file": info.file, "line": info.line, "col": info.col, "kind": info.kind,
                      "tries": st.tries, "hits": st.hits, "seconds": st.seconds})

    def step(ev: Any) -> dict[str, Any]:
        if ev.rule not in rule_index:  # a rule recorded without being registered
            rule_index[ev.rule] = len(rules)
            rules.append({"id": f"{ev.rule.ruleset}/{ev.rule.name}", "ruleset": ev.rule.ruleset,
                          "name": ev.rule.name, "file": ev.rule.file, "line": ev.rule.line, "col": ev.rule.col,
                          "kind": ev.rule.kind, "tries": 0, "hits": 0, "seconds": 0.0})
        return {"rule": rule_index[ev.rule], "before": name(ev.before), "after": name(ev.after),
                "new": [name(n) for n in ev.new], "seconds": ev.seconds}

    stages = []
    for index, rec in enumerate(trace.stages):
        stages.append({"pipeline": rec.pipeline, "name": rec.name, "kind": rec.kind, "loc": rec.loc,
                       "rules": list(rec.rules), "input": name(rec.input), "output": name(rec.output),
                       "seconds": rec.seconds, "hits": rec.hits, "facts": rec.facts,
                       "steps": [step(ev) for ev in trace.events if ev.stage_index == index]})
    loose = [step(ev) for ev in trace.events if ev.stage_index < 0]
    kernels = [{"name": k.name, "device": k.device, "ast": name(k.ast), "compile_seconds": k.compile_seconds,
                "runs": k.runs, "run_seconds": k.run_seconds} for k in trace.kernels.values()]
    return {"format": TRACE_FORMAT, "version": TRACE_VERSION, "program": program, "rules": rules,
            "stages": stages, "steps": loose, "kernels": kernels, "nodes": nodes}


def _add_nodes(root: Any, ids: NodeIds, nodes: dict[str, dict[str, Any]]) -> None:
    stack = [root]
    while stack:
        n = stack.pop()
        nid = ids(n)
        if nid in nodes:
            continue
        arg = ids.arg_text(n.arg)
        if len(arg) > ARG_TEXT_LIMIT:
            arg = arg[: ARG_TEXT_LIMIT - 3] + "..."
        nodes[nid] = {"op": n.op.name, "dtype": str(n.dtype), "arg": arg,
                      "tag": None if n.tag is None else repr(n.tag), "src": [ids(s) for s in n.src]}
        stack.extend(n.src)


def reachable(nodes: dict[str, dict[str, Any]], *roots: str) -> set[str]:
    """The ids of a trace's node table reachable from `roots` (their sources, transitively)."""
    out: set[str] = set()
    stack = [r for r in roots if r is not None]
    while stack:
        n = stack.pop()
        if n not in out:
            out.add(n)
            stack.extend(nodes[n]["src"])
    return out


def write_trace(trace: Any, path: str | Path, program: str = "") -> None:
    Path(path).write_text(json.dumps(to_json(trace, program), separators=(",", ":")))


def load_trace(path: str | Path) -> dict[str, Any]:
    """A trace file, checked to be one this version reads (TraceFormatError otherwise)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"{path}: not a readable JSON trace: {e}") from None
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        raise TraceFormatError(f"{path}: not a rulec trace (no \"format\": \"{TRACE_FORMAT}\")")
    if data.get("version") != TRACE_VERSION:
        raise TraceFormatError(f"{path}: trace version {data.get('version')!r}; this rulec reads version "
                               f"{TRACE_VERSION}")
    return data
