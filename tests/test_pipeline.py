"""The scheduler pipeline is data: stages come from pipeline.yaml, and editing it changes the schedule."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rulec import Tensor
from rulec.diagnostics import CompileError
from rulec.runtime.tensor import realize
from rulec.runtime.engine.pipeline import load_pipeline
from rulec.runtime.schedule.scheduler import default_pipeline_path, schedule_pipeline
from rulec.runtime.engine.trace import tracing


def softmax_program():
    x = np.arange(128, dtype=np.float32).reshape(16, 8) / 37.0
    a = Tensor(x)
    a.realize()
    e = np.exp(x - x.max(0, keepdims=True))
    return a.softmax(axis=0), e / e.sum(0, keepdims=True)


def test_stages_come_from_the_yaml_file():
    names = [s.name for s in schedule_pipeline().stages]
    assert names[0] == "number the uops" and "rangeify" in names and names[-1] == "assign ordering"
    assert names.index("remove costly buffers") < names.index("bufferize to store") < names.index("split kernels")


def test_dropping_a_stage_is_a_yaml_edit(tmp_path):
    text = default_pipeline_path().read_text()
    cut = text.replace("  - name: remove costly buffers\n    rules: [remove_costly_buffers]\n"
                       "    traversal: bottom_up\n", "")
    assert cut != text
    path = tmp_path / "pipeline.yaml"
    path.write_text(cut)
    pipe = load_pipeline(path)
    assert "remove costly buffers" not in [s.name for s in pipe.stages]

    out, want = softmax_program()
    default_kernels = len(Tensor.schedule(out))
    fewer_cleanups = len(realize.schedule(out, pipeline=pipe))
    assert fewer_cleanups > default_kernels == 3
    realize.realize(out, pipeline=pipe)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("old,new,token,message", [
    ("traversal: bottom_up\n    context: rangeify", "traversal: sideways\n    context: rangeify", "sideways",
     "traversal must be one of bottom_up, top_down"),
    ("context: rangeify\n", "context: rangefy\n", "rangefy", "unknown context 'rangefy'"),
    ("  - name: symbolic\n", "  - name: symbolic\n    color: red\n", "color", "unknown stage key 'color'"),
    ("when_graph_has: [MULTI, MSELECT]", "when_graph_has: [MULTI, MSELCT]", "MSELCT",
     "unknown op 'MSELCT' in when_graph_has (did you mean 'MSELECT'?)"),
    ("when_graph_has: [MULTI, MSELECT]", "when_graph_has: []", "[]",
     "when_graph_has lists no ops"),
])
def test_bad_pipeline_files_are_diagnosed(tmp_path, old, new, token, message):
    text = default_pipeline_path().read_text()
    assert old in text
    bad = text.replace(old, new, 1)
    path = tmp_path / "pipeline.yaml"
    path.write_text(bad)
    with pytest.raises(CompileError) as info:
        load_pipeline(path)
    d = info.value.diagnostics[0]
    assert message in d.message
    assert d.loc.file.endswith("pipeline.yaml")
    line = bad.splitlines()[d.loc.line - 1]
    assert line.index(token) == d.loc.col - 1


def test_a_stage_whose_ops_are_absent_is_skipped(tmp_path, monkeypatch):
    # the multi-device stage needs a MULTI or an MSELECT: on a graph with one device it makes no pass over
    # the graph; gated on an op the graph has instead, it does (and rewrites nothing)
    import rulec.runtime.engine.pipeline as pipeline_module

    passes = []
    real = pipeline_module.graph_rewrite
    monkeypatch.setattr(pipeline_module, "graph_rewrite",
                        lambda *a, **k: passes.append(k.get("name")) or real(*a, **k))
    text = default_pipeline_path().read_text()
    for ops, runs in (("[MULTI, MSELECT]", False), ("[SINK]", True)):
        path = tmp_path / ops.strip("[]").replace(", ", "_") / "pipeline.yaml"
        path.parent.mkdir()
        path.write_text(text.replace("when_graph_has: [MULTI, MSELECT]", f"when_graph_has: {ops}"))
        pipe = load_pipeline(path)
        out, want = softmax_program()
        passes.clear()
        realize.realize(out, pipeline=pipe)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
        assert "rangeify" in passes and ("multi-device lowering" in passes) == runs, (ops, passes)


def test_tracing_records_every_stage_with_rule_locations():
    out, _ = softmax_program()
    with tracing() as t:
        Tensor.schedule(out)
    stages = {e.stage for e in t.events}
    assert {"add realize", "rangeify", "bufferize to store", "split kernels"} <= stages
    ev = next(e for e in t.events if e.rule.name == "realize-to-bufferize")
    assert "rules/schedule/rangeify.yaml:" in ev.rule.loc
    assert ev.before.op.name == "REALIZE" and ev.after.op.name == "BUFFERIZE"
    hot = max(t.stats.items(), key=lambda kv: kv[1].hits)
    assert hot[1].hits > 0 and hot[1].seconds > 0
    assert "realize-to-bufferize" in t.report()


def _realize_with_trace(value: str) -> str:
    """stderr of a small program realized in a fresh process with RULEC_TRACE=value."""
    code = ("import numpy as np\nfrom rulec import Tensor\n"
            "a = Tensor(np.ones((4, 4), np.float32)); a.realize()\n(a + 1).realize()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**__import__("os").environ, "RULEC_TRACE": value})
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_rulec_trace_env_prints_rewrites():
    stderr = _realize_with_trace("1")
    assert "[rangeify] realize-to-bufferize (" in stderr and "rangeify.yaml:" in stderr
    assert "rulec: rule statistics (RULEC_TRACE=1)" in stderr  # the per-rule table, at exit


def test_rulec_trace_stats_prints_the_table_only():
    stderr = _realize_with_trace("stats")
    assert "[rangeify]" not in stderr
    table = stderr.split("rulec: rule statistics (RULEC_TRACE=stats)\n", 1)[1].splitlines()
    row = next(line for line in table if line.startswith("rangeify/realize-to-bufferize "))
    assert row.split()[3] == "1"  # hits
    assert any(line.endswith("dead") for line in table)


def test_dead_rules_show():
    """Every rule a traced stage could use is in the statistics; one that never fired is dead."""
    a = Tensor(np.ones((4, 4), np.float32))
    a.realize()
    with tracing(keep_events=False) as t:
        Tensor.schedule(a + 1)
    dead = {(i.ruleset, i.name) for i in t.dead_rules()}
    assert ("rangeify", "realize-to-bufferize") not in dead
    assert ("earliest_rewrites", "copy-after-shrink") in dead  # no copy in this program
    assert t.stats[next(i for i in t.stats if i.name == "copy-after-shrink")].hits == 0
    assert "copy-after-shrink" in t.report() and t.report().splitlines()[-1].endswith("dead")


def test_an_edit_to_rulecs_own_pipeline_is_seen_in_the_same_process(tmp_path, monkeypatch):
    """rulec's build is checked once per process, but the pipeline file is hashed at every schedule: an edit
    rebuilds and takes effect at once, as the next schedule shows."""
    import shutil

    from rulec.runtime.engine import artifacts
    from rulec.runtime.engine import pipeline as schedule

    rules = tmp_path / "rules"
    shutil.copytree(artifacts.default_sources()[0], rules, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(artifacts, "default_sources", lambda: [rules])
    monkeypatch.setattr(artifacts, "_shipped_build", [])
    monkeypatch.setattr(artifacts, "_shipped", {})
    monkeypatch.setattr(schedule, "_loaded", {})
    path = rules / "schedule" / "pipeline.yaml"
    assert "symbolic" in [s.name for s in schedule.load_pipeline(path).stages]
    path.write_text(path.read_text().replace("  - name: symbolic\n", "  - name: symbolic, renamed\n"))
    assert "symbolic, renamed" in [s.name for s in schedule.load_pipeline(path).stages]
