"""The trace format (issue 10 §2): versioned JSON, stages and steps in order, rule locations, structural
node ids that are stable across stages, runs and processes, and steps recorded as they happened."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.engine.node_ids import NodeIds
from rulec.runtime.engine.trace import tracing
from rulec.runtime.engine.trace_json import (TRACE_FORMAT, TRACE_VERSION, TraceFormatError, load_trace, reachable,
                                              to_json, write_trace)
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.engine.pipeline import load_pipeline
from rulec.runtime.schedule.scheduler import schedule_pipeline

ROOT = Path(__file__).resolve().parents[1]


def _program():
    # constants no other test uses: the lowering of a kernel is cached per process, and the trace shows what
    # happened, so a kernel another test lowered first would show no codegen stages here
    a = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    return ((a + 1.375).permute(1, 0)[1:5] * 2.625).sum(0)


@pytest.fixture(scope="module")
def traced():
    with tracing() as t:
        out = _program()
        value = out.numpy()
    np.testing.assert_allclose(value, ((np.arange(24).reshape(4, 6) + 1.375).T[1:5] * 2.625).sum(0))
    return t, to_json(t, "program")


def test_the_document_is_versioned_and_complete(traced):
    _, data = traced
    assert data["format"] == TRACE_FORMAT and data["version"] == TRACE_VERSION
    pipelines = [s["pipeline"] for s in data["stages"]]
    assert pipelines[0] == "schedule/pipeline.yaml" and "codegen/cpu.pipeline.yaml" in pipelines
    schedule = [s["name"] for s in data["stages"] if s["pipeline"] == "schedule/pipeline.yaml"]
    # every stage, in pipeline order, but those gated on ops this one-device graph lacks (`when_graph_has`)
    assert schedule == [st.name for st in schedule_pipeline().stages if not st.needs_ops]
    assert "multi-device lowering" not in schedule
    nodes = data["nodes"]
    for s in data["stages"]:
        assert s["input"] in nodes and s["output"] in nodes
        assert s["hits"] == len(s["steps"]) or s["kind"] != "rules"
        for step in s["steps"]:
            assert step["before"] in nodes and step["after"] in nodes and step["seconds"] >= 0
            assert set(step["new"]) <= _reachable(nodes, step["after"])
    assert data["kernels"] and all(k["ast"] in nodes and k["runs"] == 1 for k in data["kernels"])
    json.dumps(data)  # plain JSON


def _reachable(nodes, root):
    return reachable(nodes, root)


def test_each_step_names_its_rule_and_where_it_is_written(traced):
    _, data = traced
    steps = [st for s in data["stages"] for st in s["steps"]]
    assert len(steps) > 10
    for st in steps:
        rule = data["rules"][st["rule"]]
        line = (ROOT / rule["file"]).read_text().splitlines()[rule["line"] - 1]
        assert rule["name"] in line and rule["col"] >= 1


def test_steps_are_what_the_rule_did(traced):
    """Snapshots, not replay: each recorded step is the very rewrite the engine made, so the rule applied
    again to the recorded `before` gives the recorded `after`."""
    trace, _ = traced
    checked = 0
    for ev in trace.events:
        rec = trace.stages[ev.stage_index]
        if rec.kind != "rules" or rec.pipeline != "codegen/cpu.pipeline.yaml":
            continue  # schedule rules may read stage contexts; the codegen rules are pure
        pipe = load_pipeline(ROOT / "rules" / "codegen" / "cpu.pipeline.yaml")
        rs = next(pipe.ruleset(n) for n in rec.rules if ev.rule.ruleset == n)
        again = [r for r in rs.matcher.rewrite(ev.before, None) if r is not None] if hasattr(rs.matcher, "rewrite") else None
        if again is None:
            fn = dict(rs.matcher.dispatch[ev.before.op])
            rid = next(i for i, info in enumerate(rs.matcher.rules) if info == ev.rule)
            again = [fn[rid](ev.before, None)]
        assert again[0] is ev.after
        checked += 1
    assert checked > 0


def test_node_ids_are_structural():
    ids = NodeIds()
    a = UOp.const(dtypes.int, 3) + UOp.const(dtypes.int, 4)
    assert ids(a) == NodeIds()(UOp.const(dtypes.int, 3) + UOp.const(dtypes.int, 4))
    assert ids(a) != ids(UOp.const(dtypes.int, 4) + UOp.const(dtypes.int, 3))
    assert ids(a.replace(tag=(1,))) != ids(a)
    deep = UOp.const(dtypes.int, 0)
    for i in range(5000):  # deeper than Python's recursion limit
        deep = deep + UOp.const(dtypes.int, i)
    assert ids(deep).startswith("n") and len(ids(deep)) == 13


def test_node_ids_are_the_same_in_another_process():
    """The same program from the start of two processes (different hash seeds) gives the same ids. (A
    buffer's identity is part of its node, so ids are per program run, not per expression.)"""
    code = ("import json,sys; sys.path.insert(0, 'tests'); from test_trace_format import _program;"
            "from rulec.runtime.engine.trace import tracing; from rulec.runtime.engine.trace_json import to_json;\n"
            "with tracing() as t: _program().numpy()\n"
            "print(json.dumps(sorted(to_json(t)['nodes'])))")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    first, second = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert first == second and len(first) > 50


def test_rulec_trace_environment_variable_writes_the_file(tmp_path):
    path = tmp_path / "trace.json"
    code = "import numpy as np; from rulec import Tensor; print((Tensor(np.ones(8, np.float32)) * 3).sum().numpy())"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
                   env={**os.environ, "RULEC_TRACE": str(path)})
    data = load_trace(path)
    assert data["stages"] and data["kernels"]


def test_foreign_and_future_files_are_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(TraceFormatError, match="not a rulec trace"):
        load_trace(bad)
    bad.write_text(json.dumps({"format": TRACE_FORMAT, "version": TRACE_VERSION + 1}))
    with pytest.raises(TraceFormatError, match="version"):
        load_trace(bad)
    bad.write_text("not json")
    with pytest.raises(TraceFormatError, match="JSON"):
        load_trace(bad)


def test_without_events_only_counts_are_kept(tmp_path):
    with tracing(keep_events=False) as t:
        _program().numpy()
    assert not t.events and sum(s.hits for s in t.stages) > 0
    write_trace(t, tmp_path / "t.json")
    assert all(not s["steps"] for s in load_trace(tmp_path / "t.json")["stages"])


def test_the_python_examples_of_docs_tools_md_run():
    import re

    text = (ROOT / "docs" / "tools.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/tools.md", "exec"), {})
