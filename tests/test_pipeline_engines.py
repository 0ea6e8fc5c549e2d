"""`engine:` of a pipeline stage: the symbolic stages run on egglog, and every public program still equals
numpy (issue 9: "the engine is data too")."""
from __future__ import annotations

import numpy as np
import pytest

from rulec.runtime.engine import egraph
from rulec.runtime.engine.pipeline import load_pipeline
from rulec.runtime.schedule.scheduler import default_pipeline_path, schedule_pipeline
from rulec.runtime.tensor import realize

from test_schedule_counts import PROGRAMS, T

PIPELINE = default_pipeline_path().read_text()
PYTHON_SYMBOLIC = "rules: [index_symbolic, reduce_collapse]\n    traversal: top_down\n"


def egglog_symbolic(text: str) -> str:
    """Both symbolic stages with `index_symbolic` on egglog. egglog runs one of `reduce_collapse`'s eight rules
    (the others call helpers without an egglog form, such as affine_in), so it becomes a python stage of its
    own."""
    assert text.count(PYTHON_SYMBOLIC) == 2
    out = []
    for n, part in enumerate(text.split(PYTHON_SYMBOLIC)):
        out.append(part)
        if n < 2:
            out.append(f"rules: [index_symbolic]\n    engine: egglog\n  - name: reduce collapse {n}\n"
                       f"    rules: [reduce_collapse]\n    traversal: top_down\n")
    return "".join(out)


@pytest.fixture(scope="module")
def egglog_pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("egglog_pipeline") / "pipeline.yaml"
    path.write_text(egglog_symbolic(PIPELINE))
    return load_pipeline(path)


def test_the_stage_engine_is_compiled_into_the_pipeline(egglog_pipeline):
    engines = {s.name: s.engine for s in egglog_pipeline.stages}
    assert engines["symbolic"] == engines["symbolic after cleanups"] == "egglog"
    assert engines["reduce collapse 0"] == engines["rangeify"] == "python"
    assert {s.engine for s in schedule_pipeline().stages} == {"python"}


@pytest.mark.parametrize("name,build,ref,inputs,count", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_programs_with_the_symbolic_stages_on_egglog_equal_numpy(egglog_pipeline, monkeypatch, name, build, ref,
                                                                 inputs, count):
    runs = []
    real = egraph.run_egglog

    def counted(ruleset, graph, **options):
        runs.append(ruleset.name)
        return real(ruleset, graph, **options)

    monkeypatch.setattr(egraph, "run_egglog", counted)
    outs = build(*[T(a) for a in inputs])
    items = realize.schedule(*outs, pipeline=egglog_pipeline)
    assert runs == ["index_symbolic", "index_symbolic"]  # both stages, once per schedule
    assert len(items) <= count, f"{name}: {len(items)} kernels, reference {count}"
    realize.realize(*outs, pipeline=egglog_pipeline)
    for got, want in zip(outs, ref(*inputs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
