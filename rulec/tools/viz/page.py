"""Build the explorer page: the trace (runtime/engine/trace_json.py) plus what a browser cannot compute
itself (each rule's YAML text and generated-matcher line, kernel sources, why-not answers, dead rules),
inlined with the page's script, worker and style into one HTML file that opens from file://.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from rulec.runtime.engine.trace_json import reachable, to_json

MAX_NODES = 1500  # nodes drawn at once; a larger graph shows "showing N of M nodes" around the focus
WHYNOT_BUDGET = 3000  # (node, rule) answers computed ahead for the why-not panel
WHYNOT_NODES_PER_STAGE = 200


def _asset(name: str) -> str:
    return resources.files("rulec.tools.viz").joinpath(name).read_text(encoding="utf-8")


def build_page(trace: Any, program: str = "", max_nodes: int = MAX_NODES, whynot_budget: int = WHYNOT_BUDGET) -> str:
    data = to_json(trace, program)
    infos = _rule_infos(trace)
    rules = data["rules"]
    index = {r["id"]: i for i, r in enumerate(rules)}
    extra = {
        "max_nodes": max_nodes,
        "rule_text": [_rule_text(r["file"], r["line"]) for r in rules],
        "rule_href": [_href(r["file"]) for r in rules],
        "rule_matcher": [_matcher_line(infos.get(r["id"])) for r in rules],
        "rule_matcher_href": [],
        "kernel_source": [_kernel_source(k.ast) for k in trace.kernels.values()],
        "step_kernel": _step_kernels(data),
        "dead": [i for i, r in enumerate(rules) if r["hits"] == 0],
    }
    extra["rule_matcher_href"] = [_href(m.rsplit(":", 1)[0]) if m else "" for m in extra["rule_matcher"]]
    extra["whynot"], extra["whynot_note"] = _whynot(trace, data, index, whynot_budget)
    payload = json.dumps({"trace": data, "extra": extra}, separators=(",", ":")).replace("</", "<\\/")
    page = _asset("page.html")
    for key, text in (("/*CSS*/", _asset("explorer.css")), ("/*WORKER*/", _asset("layout_worker.js")),
                      ("/*JS*/", _asset("explorer.js")), ("/*DATA*/", payload)):
        page = page.replace(key, text, 1)
    return page


def _rule_infos(trace: Any) -> dict[str, Any]:
    out = {f"{i.ruleset}/{i.name}": i for i in trace.stats}
    for ev in trace.events:
        out.setdefault(f"{ev.rule.ruleset}/{ev.rule.name}", ev.rule)
    return out


_LINES: dict[str, list[str]] = {}


def _lines(file: str) -> list[str]:
    if file not in _LINES:
        try:
            _LINES[file] = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError:
            _LINES[file] = []
    return _LINES[file]


def _rule_text(file: str, line: int) -> str:
    """The rule's YAML: from its `- name:` line to the next item at the same indentation (or less)."""
    lines = _lines(file)
    if not 0 < line <= len(lines):
        return ""
    start = line - 1
    while start > 0 and not lines[start].lstrip().startswith("- "):
        start -= 1
    base = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > base):
        end += 1
    return "\n".join(lines[start:end]).rstrip()


def _href(file: str) -> str:
    try:
        return Path(file).resolve().as_uri()
    except ValueError:
        return file


def _matcher_line(info: Any) -> str:
    """The generated matcher function of a rule, as file:line."""
    if info is None:
        return ""
    from rulec.runtime.engine.pipeline import _ruleset

    try:
        matcher = _ruleset(None, info.ruleset).matcher
    except Exception:  # a rule set of a user's build: no generated line to show
        return ""
    for chain in matcher.dispatch.values():
        for rid, fn in chain:
            if matcher.rules[rid] == info:
                return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
    return ""


def _kernel_source(ast: Any) -> str:
    from rulec.backends.render import render

    try:
        return render(ast, "c")
    except Exception as e:  # shown in the page; the explorer is still useful without it
        return f"(could not render: {type(e).__name__}: {e})"


def _step_kernels(data: dict[str, Any]) -> dict[str, int]:
    """Steps whose result is part of a kernel's AST, linked to the first such kernel."""
    nodes = data["nodes"]
    kernel_sets = [reachable(nodes, k["ast"]) for k in data["kernels"]]
    links: dict[str, int] = {}
    for si, st in enumerate(data["stages"]):
        for sj, step in enumerate(st["steps"]):
            for k, ks in enumerate(kernel_sets):
                if step["after"] in ks:
                    links[f"{si}:{sj}"] = k
                    break
    return links


def _whynot(trace: Any, data: dict[str, Any], index: dict[str, int], budget: int) -> tuple[dict[str, list], str]:
    """Answers for the why-not panel: for the nodes of each stage's result and the nodes its steps rewrote,
    each rule of the stage whose pattern has that node's op at its root and did not fire on it."""
    from rulec.runtime.engine.node_ids import NodeIds
    from rulec.tools.explain import ExplainError, namespace_of, rule_model, stage_rules
    from rulec.tools.why_not import explain_rule

    ids = NodeIds()
    out: dict[str, list] = {}
    models: dict[Any, Any] = {}
    count, cut, missing = 0, False, 0
    for si, rec in enumerate(trace.stages):
        rules = stage_rules(rec)
        if not rules or rec.output is None:
            continue
        fired = {(ev.before, ev.rule) for ev in trace.events if ev.stage_index == si}
        candidates = list(dict.fromkeys([ev.before for ev in trace.events if ev.stage_index == si]
                                        + list(rec.output.toposort())[::-1]))[:WHYNOT_NODES_PER_STAGE]
        for node in candidates:
            answers = []
            for info in rules:
                rid = index.get(f"{info.ruleset}/{info.name}")
                if rid is None or (node, info) in fired:
                    continue
                if info not in models:
                    try:
                        models[info] = rule_model(info)
                    except ExplainError:
                        models[info] = None
                        missing += 1
                rule = models[info]
                if rule is None or (rule.match.ops is not None and node.op not in rule.match.ops):
                    continue
                if count >= budget:
                    cut = True
                    break
                why = explain_rule(rule, node, namespace_of(rec.matcher, info), lambda u: ids(u))
                answers.append([rid, why.lines(rule)])
                count += 1
            if answers:
                out[f"{si}:{ids(node)}"] = answers
    note = f"answers were computed for {count} (node, rule) pairs" + (" and then cut" if cut else "")
    if missing:
        note += f"; {missing} rule(s) could not be read from their files"
    return out, note
