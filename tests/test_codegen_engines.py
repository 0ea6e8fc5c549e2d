"""The codegen lowering stages on the egglog engine (issue 9, "the engine is data too").

The cpu and gpu lowering pipelines are copied with every stage of rules switched to `engine: egglog`; what
stays Python is a `call:` step, a decision over the whole kernel (which loop to upcast and its unroll, which
loops become thread ids, runtime/codegen/steps.py). Every public program (tests/test_schedule_counts.py) is
lowered with them, run, and compared with numpy. The test counts the egglog runs, so it cannot pass by
falling back to Python, and checks that each switched stage has a real egglog program. The gpu lowering
renders for CUDA and OpenCL as the python engine's does, except where a rule that has no egglog form fired
in the python lowering: such kernels run on OpenCL and equal numpy.
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
from rulec.runtime.codegen import steps
from rulec.runtime.device import Device
from rulec.runtime.engine import egraph
from rulec.runtime.engine.trace import tracing
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine.pipeline import load_pipeline, run_pipeline
from rulec.runtime.tensor import realize

from opencl_probe import NEEDS_CL
from test_schedule_counts import PROGRAMS, T, rnd

EGGLOG_STAGES = ("unit loops", "symbolic", "memory", "accumulators", "thread ids")
# the rule sets of each target's egglog stages, in pipeline order
EGGLOG_SETS = {"cpu": ["unit_loops", "index_symbolic", "kernel_memory", "reduce_to_accumulator"],
               "gpu": ["unit_loops", "index_symbolic", "kernel_memory", "reduce_to_accumulator",
                       "ranges_to_thread_ids"]}
ALL_SETS = set(EGGLOG_SETS["gpu"])
# the Python steps: whole-kernel decisions (rules/codegen/*.pipeline.yaml `call:`), the same on both engines
CALL_STEPS = {"cpu": {"upcast", "extract index arithmetic"}, "gpu": {"extract index arithmetic", "mark thread loops"}}
# rules of the egglog stages that egglog cannot run (a helper without an egglog form); nothing else may be
# skipped, so a regression in the encoding fails here
PYTHON_ONLY_RULES: dict[str, str] = {}
# rule stages that stay on the python engine: every rule of `kernel_gates` folds an index or a gate through
# a nested rewrite over bounds (simplified_given, simplified_gate), which has no egglog form
PYTHON_STAGES = {"gates": ["kernel_gates"]}
# rules that may fire on python and not on egglog in the programs: those above, and `where-of-gated-load`,
# whose `z@CONST` with `z.arg == 0` matches no float zero on egglog (held as FCONST, by its bits)
EGGLOG_GAPS = set(PYTHON_ONLY_RULES) | {"where-of-gated-load"}



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
    assert set(switched) <= set(EGGLOG_STAGES) and len(switched) == len(set(switched)), switched
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
        # every stage of rules runs on egglog but PYTHON_STAGES: what stays Python is a `call:` step (a
        # whole-kernel decision) or a stage whose rules fold through a nested rewrite
        assert {s.name for s in pipe.stages if s.call is not None} == CALL_STEPS[target], target
        assert {s.name: s.rules for s in pipe.stages if s.call is None and s.engine != "egglog"} == PYTHON_STAGES
        assert [n for s in pipe.stages if s.engine == "egglog" for n in s.rules] == EGGLOG_SETS[target], target
        for st in pipe.stages:
            for set_name in st.rules if st.engine == "egglog" else ():
                rs = pipe.ruleset(set_name)
                skipped = dict(rs.egglog_skipped)
                assert rs.egglog_path is not None, set_name
                egg = egraph.read_egg(rs.egglog_path.read_text(), set_name)
                assert egg.rules, f"{set_name}: an empty egglog program"
                assert len(egg.rules) + len(skipped) == len(rs.rules)
                for rule, why in skipped.items():
                    assert PYTHON_ONLY_RULES.get(rule, "\0") in why, (set_name, rule, why)


def test_thread_ids_are_marked_by_a_step_and_lowered_by_rules():
    """The step only renames the chosen RANGEs' kind; the rules make each a SPECIAL of its dimension, on both
    engines, and the ENDs stop closing it."""
    a, b = T(np.ones((4, 6), np.float32)), T(np.ones((6, 8), np.float32))
    (item,) = [it for it in realize.schedule(a @ b) if it.ast.op is Ops.SINK]
    pipe = load_pipeline(rules_dir() / "codegen" / "gpu.pipeline.yaml")
    before = pipe.without("mark thread loops", "thread ids")
    sink, _ = run_pipeline(item.ast, before)
    marked = steps.mark_thread_loops(sink)
    kinds = sorted(u.arg[1] for u in marked.toposort() if u.op is Ops.RANGE)
    assert kinds == ["reduce", "thread0", "thread1"], kinds
    rs = pipe.ruleset("ranges_to_thread_ids")
    for engine in ("python", "egglog"):
        out = rs.rewrite(marked, engine=engine)
        nodes = out.toposort()
        assert sorted((u.arg, u.src[0].arg) for u in nodes if u.op is Ops.SPECIAL) == [(0, 8), (1, 4)], engine
        assert [u.arg[1] for u in nodes if u.op is Ops.RANGE] == ["reduce"], engine  # the reduce loop stays
        assert all(r.op is Ops.RANGE for u in nodes if u.op is Ops.END for r in u.src[1:]), engine


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
    assert [r for r in egglog_runs if r in ALL_SETS] == EGGLOG_SETS["cpu"] * len(lowered), (name, egglog_runs)


def _gated_load(buf: UOp, i: UOp, gate: UOp) -> UOp:
    return UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.INDEX, buf.dtype, (buf, i, gate)),))


def test_implies_runs_on_egglog_as_on_python():
    """`where-of-gated-load` (its guard `implies(h, g)`, a subset test of conjuncts) fires on egglog exactly
    where it does on python: a gate with more conjuncts implies one with fewer, in any order, not conversely."""
    rs = load_pipeline(rules_dir() / "codegen" / "cpu.pipeline.yaml").ruleset("kernel_memory")
    assert "where-of-gated-load" not in dict(rs.egglog_skipped)
    buf = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(16), (), 0)
    i, j = UOp.range(16, 0), UOp.range(4, 1)
    a, b, c = i < 12, j < 3, i < 5
    cases = [(a & b, a, True), (a & b, b & a, True), ((a & b) & c, c & a, True), (a, a & b, False), (a, b, False)]
    for h, g, fires in cases:
        w = UOp(Ops.WHERE, dtypes.int32, (g, _gated_load(buf, i, h), UOp.const(dtypes.int32, 0)))
        stats: dict = {}
        py, egg = rs.rewrite(w), rs.rewrite(w, engine="egglog", allow_partial=True, stats=stats)
        assert py is egg, (h, g)
        assert (egg.op is Ops.LOAD) == fires and (stats["matches"].get("where-of-gated-load", 0) > 0) == fires


def test_the_upcast_step_feeds_the_egglog_stages(egglog_root):
    """The CPU pipeline's upcast (a `call:` step) runs before the egglog stages: a 32 x 16 matmul's outputs
    become 8 x 4 iterations of a 4 x 4 tile of stores, and the egglog stages lower all of them."""
    a, b = T(rnd(32, 48)), T(rnd(48, 16))
    (item,) = [it for it in realize.schedule(a @ b) if it.ast.op is Ops.SINK]
    egg = lower_with(egglog_root, item.ast, "cpu").lowered.toposort()
    upcast = [u for u in egg if u.op is Ops.RANGE and u.arg[1] == "upcast"]
    assert sorted(u.src[0].arg for u in upcast) == sorted([16 // steps.INNER_LANES, 32 // steps.UPCAST2])
    assert sum(1 for u in egg if u.op is Ops.STORE and u.src[0].op is Ops.INDEX) == steps.INNER_LANES * steps.UPCAST2
    assert not any(u.op is Ops.REDUCE for u in egg)  # the accumulators stage ran on every lane


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
            assert [r for r in runs if r in ALL_SETS] == EGGLOG_SETS["gpu"], (name, runs)
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
                assert fired & EGGLOG_GAPS, (name, k, lang, fired)
                differ.append(name)
    assert len(gpu_lowerings) > 20 and len(set(differ)) < len(PROGRAMS) // 4
    # the thread-id rules ran on egglog: most kernels have thread ids, as the python lowering's do
    assert sum(1 for *_, egg, _py, _f in gpu_lowerings if egg.thread_dims) > 20




@NEEDS_CL
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
