"""The rule sets a pipeline's Python runs itself come from the pipeline's own build, through its stage
context (and, for helpers, which rules give no context, through the run): runtime/engine/matchers.py."""
from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine import matchers
from rulec.runtime.schedule.callbacks.rangeify import RangeifyContext
from rulec.runtime.engine.pipeline import load_pipeline
from rulec.runtime.schedule.scheduler import default_pipeline_path, schedule_pipeline
from rulec.runtime.tensor import realize

PIPELINE = default_pipeline_path().read_text()

PROBE = """\
# index_symbolic, as the callbacks and helpers of this folder's pipeline run it: a probe that sees every
# node first and changes none, then the usual rules
probe:
  doc: sees, rewrites nothing
  rules:
    - name: probe
      match: x@WHERE|OR|AND|ADD|MUL|MOD|IDIV
      call: probe_matchers_xyz:saw
index_symbolic:
  doc: the probe, then the index rules
  include: [probe, stage_symbolic]
"""


PROBE_PY = """\
SEEN = []


def saw(x):
    SEEN.append(x)
    return None
"""


def user_folder(tmp_path):
    """A rule folder whose `index_symbolic` differs from rulec's: the pipeline's stages run the usual rules
    (renamed `stage_symbolic`); only the Python the stages call runs `index_symbolic`, with the probe."""
    d = tmp_path / "myrules"
    d.mkdir()
    shutil.copy(rules_dir() / "symbolic.yaml", d / "symbolic.yaml")
    index = (rules_dir() / "schedule" / "index.yaml").read_text()
    assert index.count("\nindex_symbolic:") == 1
    (d / "index.yaml").write_text(index.replace("\nindex_symbolic:", "\nstage_symbolic:"))
    (d / "probe.yaml").write_text(PROBE)
    (d / "probe_matchers_xyz.py").write_text(PROBE_PY)
    old = "rules: [index_symbolic, reduce_collapse]"
    assert PIPELINE.count(old) == 2
    (d / "pipeline.yaml").write_text(PIPELINE.replace(old, "rules: [stage_symbolic, reduce_collapse]"))
    return d


def test_the_callbacks_run_the_index_symbolic_of_the_pipelines_own_build(tmp_path):
    pipe = load_pipeline(user_folder(tmp_path) / "pipeline.yaml")
    assert pipe.matchers == ("index_symbolic", "kernel_globals", "kernel_codegen")
    assert "probe" in [r.name for r in pipe.stage_matchers()["index_symbolic"].rules]

    def probed(build, inputs, want):
        if "probe_matchers_xyz" in sys.modules:  # imported by the first build of the folder
            sys.modules["probe_matchers_xyz"].SEEN.clear()
        ts = []
        for a in inputs:
            t = Tensor(a)
            t.realize()
            ts.append(t)
        out = build(*ts)
        realize.realize(out, pipeline=pipe)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
        return len(sys.modules["probe_matchers_xyz"].SEEN) if "probe_matchers_xyz" in sys.modules else 0

    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    # the helper path: a pad's indices are folded by pad_indices (a helper the rules call, given no context)
    assert probed(lambda t: t.pad(((2, 0), (0, 3))) * 2, [a], np.pad(a, ((2, 0), (0, 3))) * 2) > 0
    # a stateful callback: index_child (rangeify) folds the index its consumers share with the run's matchers
    m = a.max(1, keepdims=True)
    # (m.T.T: two different paths to one index, so the gate runs and finds them agree)
    assert probed(lambda t: (lambda m: (t - m) * m.T.T)(t.max(1, keepdim=True)), [a], (a - m) * m) > 0
    # rulec's own pipeline, in the same process, never sees the probe
    sys.modules["probe_matchers_xyz"].SEEN.clear()
    t = Tensor(a)
    t.realize()
    (t.pad(((2, 0), (0, 3))) * 2).realize()
    assert sys.modules["probe_matchers_xyz"].SEEN == []


def test_the_pipelines_matchers_are_its_own_builds_and_only_those_declared():
    pipe = schedule_pipeline()
    assert pipe.stage_matchers()["index_symbolic"] is pipe.ruleset("index_symbolic").matcher
    assert isinstance(pipe.make_context("rangeify"), RangeifyContext) and pipe.make_context("uop_list") == []
    with pytest.raises(KeyError, match="not among the matchers of .*declared under `matchers:`: index_symbolic"):
        pipe.stage_matchers()["rangeify"]


def test_the_current_matchers_are_the_runs_and_rulecs_own_outside_a_run():
    assert matchers.current() is matchers.SHIPPED
    pipe = schedule_pipeline()
    with matchers.running(pipe.stage_matchers()) as m:
        assert matchers.current() is m
        with matchers.running(matchers.StageMatchers((), lambda n: None, "an empty pipeline")) as inner:
            assert matchers.current() is inner  # an empty declaration is not "no run"
        assert matchers.current() is m
    assert matchers.current() is matchers.SHIPPED
