"""The codegen lowering stages on the egglog engine (issue 9, "the engine is data too").

The cpu and gpu lowering pipelines are copied with every stage whose rule sets egglog can run switched to
`engine: egglog`; every public program (tests/test_schedule_counts.py) is lowered with them, run, and
compared with numpy. The test counts the egglog runs, so it cannot pass by falling back to Python, and
checks that each switched stage has a real egglog program. The gpu lowering renders for CUDA and OpenCL as
the python engine's does, except where a rule that has no egglog form fired in the python lowering: such
kernels run on OpenCL and equal numpy.
"""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest

import rulec.backends.device as device_mod
from rulec import Tensor
from rulec.backends.render import backend, kernel_name
from rulec.runtime.codegen import lower as lower_mod
from rulec.runtime.device import Device
from rulec.runtime.engine import egraph
from rulec.runtime.engine.trace import tracing
from rulec.runtime.ir.ops import Ops
from rulec.runtime.resources import rules_dir
from rulec.runtime.schedule.pipeline import load_pipeline
from rulec.runtime.tensor import realize

from test_schedule_counts import PROGRAMS, T

EGGLOG_STAGES = ("unit loops", "symbolic", "memory", "accumulators")
EGGLOG_SETS = ["unit_loops", "index_symbolic", "kernel_memory", "reduce_to_accumulator"]  # their rule sets
# stages that stay on Python, and why: their one rule computes with a helper that has no egglog form
PYTHON_STAGES = {"upcast": "upcast_loop()", "thread ids": "thread_loops()"}
# rules of the egglog stages that egglog cannot run (a helper without an egglog form); nothing else may be
# skipped, so a regression in the encoding fails here
PYTHON_ONLY_RULES = {"gated-index-drops-mod": "within_given()", "where-of-gated-load": "implies()"}


def _have_opencl() -> str | None:
    try:
        import pyopencl as cl

        return None if cl.get_platforms() else "no OpenCL platform"
    except Exception as e:  # noqa: BLE001 - any failure to find a platform means: skip, saying why
        return f"OpenCL unavailable: {e}"


def egglog_stages(text: str) -> str:
    """The pipeline file with each of EGGLOG_STAGES on egglog (egglog saturates: no traversal)."""
    out, stage, switched = [], None, []
    for line in text.splitlines():
        m = re.match(r"  - name: (.*)$", line)
        if m:
            stage = m.group(1)
        if stage in EGGLOG_STAGES and line.strip().startswith("traversal:"):
            line = "    engine: egglog"
            switched.append(stage)
        out.append(line)
    assert sorted(switched) == sorted(EGGLOG_STAGES), switched
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def egglog_root(tmp_path_factory):
    """A rules folder whose codegen/ holds the egglog copies of the cpu and gpu pipelines."""
    root = tmp_path_factory.mktemp("egglog_codegen")
    (root / "codegen").mkdir()
    for name in lower_mod.PIPELINES.values():
        (root / "codegen" / name).write_text(egglog_stages((rules_dir() / "codegen" / name).read_text()))
    return root


def lower_with(root, ast, target: str):
    """lower(ast, target), with the pipelines of `root`/codegen (uncached)."""
    return lower_mod.lower(ast, target, pipeline=load_pipeline(root / "codegen" / lower_mod.PIPELINES[target]))


@pytest.fixture
def egglog_runs(monkeypatch):
    """The rule sets the egglog engine runs, in order."""
    runs: list[str] = []
    real = egraph.run_egglog

    def counted(ruleset, graph, **options):
        runs.append(ruleset.name)
        return real(ruleset, graph, **options)

    monkeypatch.setattr(egraph, "run_egglog", counted)
    return runs


def test_the_switched_stages_have_egglog_programs(egglog_root):
    for target, name in lower_mod.PIPELINES.items():
        pipe = load_pipeline(egglog_root / "codegen" / name)
        engines = {s.name: s.engine for s in pipe.stages if s.call is None}
        assert {n for n, e in engines.items() if e == "egglog"} == set(EGGLOG_STAGES), target
        assert {n for n, e in engines.items() if e == "python"} == set(PYTHON_STAGES) & set(engines), target
        for st in pipe.stages:
            for set_name in st.rules:
                rs = pipe.ruleset(set_name)
                skipped = dict(rs.egglog_skipped)
                if st.name in PYTHON_STAGES:
                    # the stage's own rule has no egglog form: running it there would change the kernel
                    assert any(PYTHON_STAGES[st.name] in why for why in skipped.values()), (st.name, skipped)
                    continue
                assert rs.egglog_path is not None, set_name
                egg = egraph.read_egg(rs.egglog_path.read_text(), set_name)
                assert egg.rules, f"{set_name}: an empty egglog program"
                assert len(egg.rules) + len(skipped) == len(rs.rules)
                for rule, why in skipped.items():
                    assert PYTHON_ONLY_RULES.get(rule, "\0") in why, (set_name, rule, why)


@pytest.mark.parametrize("name,build,ref,inputs,count", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_programs_lowered_on_egglog_equal_numpy(egglog_root, egglog_runs, monkeypatch, name, build, ref, inputs,
                                                count):
    lowered = []

    def lower(ast, target):
        lowered.append(ast)
        return lower_with(egglog_root, ast, target)

    monkeypatch.setattr(device_mod, "lower", lower)
    monkeypatch.setattr(device_mod, "_compiled", OrderedDict())  # compile every kernel afresh
    outs = build(*[T(a) for a in inputs])
    realize.realize(*outs)
    for got, want in zip(outs, ref(*inputs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=name)
    # every kernel was lowered with each egglog stage, once, in order (the `extract index arithmetic` step
    # runs egglog too, on its own rule set, where it expects a gain)
    assert [r for r in egglog_runs if r in EGGLOG_SETS] == EGGLOG_SETS * len(lowered), (name, egglog_runs)


@pytest.fixture(scope="module")
def gpu_lowerings(egglog_root):
    """(program, kernel index, item, egglog lowering, python lowering, rules the python lowering fired)."""
    out = []
    runs: list[str] = []
    real = egraph.run_egglog

    def counted(ruleset, graph, **options):
        runs.append(ruleset.name)
        return real(ruleset, graph, **options)

    for name, build, _, inputs, _ in PROGRAMS:
        for k, item in enumerate(realize.schedule(*build(*[T(a) for a in inputs]))):
            if item.ast.op is not Ops.SINK:
                continue
            with tracing() as t:
                py = lower_mod.lower(item.ast, "gpu", pipeline=load_pipeline(rules_dir() / "codegen" / "gpu.pipeline.yaml"))
            fired = {e.rule.name for e in t.events}
            del runs[:]
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(egraph, "run_egglog", counted)
                egg = lower_with(egglog_root, item.ast, "gpu")
            assert [r for r in runs if r in EGGLOG_SETS] == EGGLOG_SETS, (name, runs)
            out.append((name, k, item, egg, py, fired))
    return out


def test_gpu_lowering_on_egglog_renders_as_the_python_one(gpu_lowerings):
    differ = []
    for name, k, item, egg, py, fired in gpu_lowerings:
        assert egg.thread_dims == py.thread_dims and egg.globals == py.globals and egg.outputs == py.outputs
        for lang in ("cuda", "opencl"):
            b = backend(lang)
            a, want = b.render(egg, kernel_name(item.ast)), b.render(py, kernel_name(item.ast))
            if a != want:
                # only a rule that egglog cannot run may make the kernels differ
                assert fired & set(PYTHON_ONLY_RULES), (name, k, lang, fired)
                differ.append(name)
    assert len(gpu_lowerings) > 20 and len(set(differ)) < len(PROGRAMS) // 4


NO_CL = _have_opencl()


@pytest.mark.skipif(NO_CL is not None, reason=str(NO_CL))
def test_gpu_kernels_that_differ_run_on_opencl_and_equal_numpy(egglog_root, gpu_lowerings, monkeypatch):
    names = {name for name, _, _, egg, py, _ in gpu_lowerings if egg.lowered is not py.lowered}
    assert names, "no kernel differs: the check below would test nothing new"
    monkeypatch.setattr(device_mod, "lower", lambda ast, target: lower_with(egglog_root, ast, target))
    monkeypatch.setattr(device_mod, "_compiled", OrderedDict())
    monkeypatch.setattr(Device, "DEFAULT", "CL")
    for name, build, ref, inputs, _ in PROGRAMS:
        if name not in names:
            continue
        outs = build(*[T(a) for a in inputs])
        assert all(it.device == "CL" for it in Tensor.schedule(*outs))
        Tensor.realize(*outs)
        for got, want in zip(outs, ref(*inputs)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=f"{name} on CL")
