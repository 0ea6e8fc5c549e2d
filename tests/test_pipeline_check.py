"""pipeline.yaml and ops.yaml are checked like every rule file: `rulec check` and `rulec build` report each
mistake as `file:line:col: error:` (the pipeline counterparts of tests/test_checks.py), and the scheduler
reads the pipeline through the same checker."""
from __future__ import annotations

import subprocess
import sys

import pytest

from rulec import Tensor
from rulec.compiler import compile_project
from rulec.diagnostics import CompileError
from rulec.runtime.tensor import realize
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine.pipeline import load_pipeline
from rulec.runtime.schedule.scheduler import default_pipeline_path

from test_checks import assert_diag, only

PIPELINE = default_pipeline_path().read_text()
OPS = (rules_dir() / "ops.yaml").read_text()


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rulec.cli", *args], capture_output=True, text=True, cwd=cwd)


def edited(tmp_path, monkeypatch, text: str, old: str, new: str, name: str) -> tuple[str, str]:
    """Write `text` with one edit to tmp_path/name; returns the path (as diagnostics show it) and the new text."""
    assert text.count(old) >= 1, old
    bad = text.replace(old, new, 1)
    (tmp_path / name).write_text(bad)
    monkeypatch.chdir(tmp_path)
    return name, bad


def the_error(path: str):
    with pytest.raises(CompileError) as info:
        compile_project([path])
    return only(info.value.diagnostics)


def at_token(d, text: str, token: str, message: str) -> None:
    """The one error is `message`, at the first occurrence of `token` on its line."""
    line = text.split("\n")[d.loc.line - 1]
    assert_diag(d, d.loc.line, line.index(token) + 1, message)
    assert token in line


# ------------------------------------------------------------------ the shipped files are valid

@pytest.mark.parametrize("path", ["rules/schedule/pipeline.yaml", "rules/ops.yaml", "rules"])
def test_the_shipped_files_check_clean(path):
    r = cli("check", str(rules_dir().parent / path))
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr.replace("0 errors", "")


def test_checking_the_rules_folder_includes_the_pipeline_and_the_op_table(tmp_path):
    import shutil

    shutil.copytree(rules_dir(), tmp_path / "rules")
    text = (tmp_path / "rules/schedule/pipeline.yaml").read_text().replace("traversal: top_down", "traversal: up", 1)
    (tmp_path / "rules/schedule/pipeline.yaml").write_text(text)
    (tmp_path / "rules/ops.yaml").write_text(OPS.replace("  NOOP: {}", "  NOOP: {arity: -1}"))
    r = cli("check", "rules", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert [e.split(": error: ")[0].rsplit(":", 2)[0] for e in errors] == ["rules/ops.yaml",
                                                                            "rules/schedule/pipeline.yaml"]


# ------------------------------------------------------------------ pipeline.yaml

def _line(text: str) -> int:
    """The line of the shipped pipeline that is exactly `text`."""
    return PIPELINE.split("\n").index(text) + 1


PIPELINE_CASES = {
    # old, new, token, message
    "traversal": ("traversal: bottom_up\n    context: rangeify", "traversal: sideways\n    context: rangeify",
                  "sideways", "traversal must be one of bottom_up, top_down, not 'sideways'"),
    "traversal typo": ("traversal: bottom_up\n    context: rangeify", "traversal: bottomup\n    context: rangeify",
                       "bottomup", "traversal must be one of bottom_up, top_down, not 'bottomup' "
                                   "(did you mean 'bottom_up'?)"),
    "rule-set name": ("rules: [rangeify]", "rules: [rangefy]", "rangefy",
                      "unknown rule set 'rangefy' (did you mean 'rangeify'?)"),
    "context name": ("context: rangeify\n", "context: rangefy\n", "rangefy",
                     "unknown context 'rangefy' (did you mean 'rangeify'?)"),
    "stage key": ("    traversal: bottom_up\n    context: rangeify", "    travesal: bottom_up\n    context: rangeify",
                  "travesal", "unknown stage key 'travesal' (did you mean 'traversal'?)"),
    "top-level key": ("stages:\n", "stage:\n", "stage", "unknown pipeline key 'stage' (did you mean 'stages'?)"),
    "result": ("result: discard", "result: drop", "drop", "result must be keep or discard, not 'drop'"),
    "rules and call": ("  - name: collect outputs\n", "  - name: collect outputs\n    rules: [rangeify]\n",
                       "collect outputs", "stage 'collect outputs' has both `rules` and `call`: give exactly one"),
    "neither": ("  - name: split kernels\n    rules: [split_kernels]\n", "  - name: split kernels\n",
                "split kernels", "stage 'split kernels' has neither `rules` and `call`: give exactly one"),
    "duplicate stage": ("  - name: symbolic after cleanups\n", "  - name: symbolic\n", "symbolic",
                        f"stage name 'symbolic' is already used at pipeline.yaml:{_line('  - name: symbolic')}:11"),
    "traversal of a call": ("    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n",
                            "    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n    traversal: top_down\n",
                            "traversal", "`traversal` applies to rule stages; stage 'collect outputs' is a `call`"),
    "call syntax": ("cleanups:collect_outputs", "cleanups.collect_outputs", "rulec",
                    "call must be 'package.module:function', got 'rulec.runtime.schedule.callbacks.cleanups.collect_outputs'"),
    "call of the standard library": ("rulec.runtime.schedule.callbacks.cleanups:collect_outputs", "builtins:print", "builtins",
                                     "call 'builtins:print' is in Python's standard library; only functions defined "
                                     "in declared callback modules may be called"),
    "call of an undeclared module": ("rulec.runtime.schedule.callbacks.cleanups:collect_outputs",
                                     "rulec.runtime.schedule.callbacks.kernel:split_store", "rulec",
                                     "callback module 'rulec.runtime.schedule.callbacks.kernel' is not declared: list it under "
                                     "`callbacks:` at the top of pipeline.yaml, or put the package rulec/ beside it"),
    "call of a missing function": ("cleanups:collect_outputs", "cleanups:collect_output", "rulec",
                                   "module 'rulec.runtime.schedule.callbacks.cleanups' has no function 'collect_output' "
                                   "(did you mean 'collect_outputs'?)"),
    "call with a context": ("    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n",
                            "    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n    context: uop_list\n",
                            "rulec", "call step collect_outputs takes 1 positional parameter (sink); stage "
                                     "'collect outputs' calls it as collect_outputs(sink, ctx)"),
    "call of a class": ("rulec.runtime.schedule.callbacks.cleanups:collect_outputs",
                        "rulec.runtime.schedule.callbacks.children:ChildrenContext", "rulec",
                        "'rulec.runtime.schedule.callbacks.children:ChildrenContext' is a class; a call step is a function"),
    "duplicate key": ("    rules: [rangeify]\n", "    rules: [rangeify]\n    rules: [rangeify]\n", "rules",
                      f"duplicate key 'rules' (first at line {_line('    rules: [rangeify]')})"),
    "context factory of the standard library": ("uop_list: list", "uop_list: builtins:list", "builtins",
                                                "context factory 'builtins:list' is in Python's standard library; "
                                                "only functions defined in declared callback modules may be called"),
    "context factory missing": ("children:ChildrenContext", "children:ChildContext", "rulec",
                                "module 'rulec.runtime.schedule.callbacks.children' has no function 'ChildContext'"),
    "declared standard library": ("callbacks:\n", "callbacks:\n  - os\n", "os",
                                  "'os' is part of Python's standard library; callbacks must be defined in your own "
                                  "modules"),
    "unknown engine": ("    rules: [remove_costly_buffers]\n", "    rules: [remove_costly_buffers]\n    engine: eglog\n",
                       "eglog", "unknown engine 'eglog': a stage runs on one of python, egglog (did you mean 'egglog'?)"),
    "egglog on a call": ("    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n",
                         "    call: rulec.runtime.schedule.callbacks.cleanups:collect_outputs\n    engine: egglog\n",
                         "egglog", "stage 'collect outputs' is a `call`: a Python step runs no engine"),
    "egglog with a context": ("    traversal: bottom_up\n    context: rangeify", "    engine: egglog\n    context: rangeify",
                              "egglog", "stage 'rangeify' has a context ('rangeify'); the egglog engine runs pure rules "
                                        "and passes no context: use the python engine"),
    "egglog with a traversal": ("    rules: [remove_costly_buffers]\n    traversal: bottom_up\n",
                                "    rules: [remove_costly_buffers]\n    traversal: bottom_up\n    engine: egglog\n",
                                "traversal", "`traversal` applies to the python engine; stage 'remove costly buffers' "
                                             "runs on egglog, which saturates the whole graph"),
    "egglog on a set with callbacks": ("    rules: [split_kernels]\n    traversal: top_down\n",
                                       "    rules: [split_kernels]\n    engine: egglog\n", "split_kernels",
                                       "rule set 'split_kernels' has callbacks (store-to-kernel): stage 'split kernels' "
                                       "can run it on the python engine only"),
    "matchers: unknown set": ("matchers: [index_symbolic,", "matchers: [index_symbolc,", "index_symbolc",
                              "unknown rule set 'index_symbolc' (did you mean 'index_symbolic'?)"),
    "invalid YAML": ("    context: rangeify\n", "    context: [rangeify\n", ":",
                     f"invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line "
                     f"{_line('    context: rangeify')})"),
}


@pytest.mark.parametrize("case", PIPELINE_CASES.values(), ids=PIPELINE_CASES.keys())
def test_bad_pipeline(tmp_path, monkeypatch, case):
    old, new, token, message = case
    path, bad = edited(tmp_path, monkeypatch, PIPELINE, old, new, "pipeline.yaml")
    d = the_error(path)
    at_token(d, bad, token, message)
    # the scheduler reads the file through the same checker, so it reports the same error
    with pytest.raises(CompileError) as info:
        load_pipeline(tmp_path / path)
    assert [x.render() for x in info.value.diagnostics if x.severity == "error"] == [d.render()]


def test_the_issue_example_fails_check_and_build_with_exit_1(tmp_path):
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("traversal: bottom_up", "traversal: sideways", 1))
    for command in (["check"], ["build", "-o", "out"]):
        r = cli(*command, "pipeline.yaml", cwd=tmp_path)
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith("pipeline.yaml:") and ": error: traversal must be one of" in r.stderr
        assert "Traceback" not in r.stderr


def test_a_context_factory_must_take_no_arguments(tmp_path, monkeypatch):
    (tmp_path / "ctx_factories_xyz.py").write_text("def make(n):\n    return [0] * n\n")
    path, bad = edited(tmp_path, monkeypatch, PIPELINE, "uop_list: list", "uop_list: ctx_factories_xyz:make",
                       "pipeline.yaml")
    at_token(the_error(path), bad, "ctx_factories_xyz",
             "context factory make must take no arguments, but it takes n")


def test_checking_a_pipeline_runs_no_callback_code_building_imports_it(tmp_path, monkeypatch):
    marker = tmp_path / "ran.txt"
    (tmp_path / "step_xyz.py").write_text(f"open({str(marker)!r}, 'w').close()\n\n\ndef step(sink):\n    return sink\n")
    path, _ = edited(tmp_path, monkeypatch, PIPELINE, "rulec.runtime.schedule.callbacks.cleanups:collect_outputs",
                     "step_xyz:step", "pipeline.yaml")
    compile_project([path])
    assert not marker.exists()
    # loading compiles the file first, and a build (unlike a check) imports the modules it declares
    load_pipeline(tmp_path / path)
    assert marker.exists()


def test_a_call_step_beside_the_pipeline_runs(tmp_path):
    # a module beside the pipeline needs no declaration, and the scheduler finds it there
    (tmp_path / "step_beside_xyz.py").write_text(
        "from rulec.runtime.schedule.callbacks.cleanups import collect_outputs as _collect\n\n\n"
        "CALLS = []\n\n\ndef step(sink):\n    CALLS.append(sink)\n    return _collect(sink)\n")
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("rulec.runtime.schedule.callbacks.cleanups:collect_outputs",
                                                             "step_beside_xyz:step"))
    pipe = load_pipeline(tmp_path / "pipeline.yaml")
    import numpy as np

    out = Tensor(np.ones((4, 4), np.float32)) + 1
    assert len(realize.schedule(out, pipeline=pipe)) == 1
    assert len(sys.modules["step_beside_xyz"].CALLS) == 1


# ------------------------------------------------------------------ ops.yaml

OPS_CASES = {
    "op key": ("  IOTA: {arity: 0}", "  IOTA: {ariti: 0}", "ariti", "unknown op key 'ariti' (did you mean 'arity'?)"),
    "arity": ("  BIND: {arity: 2}", "  BIND: {arity: two}", "two", "arity of BIND must be a whole number of sources, "
                                                                     "not 'two'"),
    "negative arity": ("  NOOP: {}", "  NOOP: {arity: -1}", "-1", "arity of NOOP must be a whole number of sources, "
                                                                   "not '-1'"),
    "commutative arity": ("  DETACH: {arity: 1}", "  DETACH: {arity: 1, commutative: true}", "true",
                          "commutative op DETACH must have arity 2 (its two sources are swapped)"),
    "dtype rule": ("  SINK: {dtype: void}", "  SINK: {dtype: viod}", "viod",
                   "unknown result dtype rule 'viod' (did you mean 'void'?)"),
    "cost": ("  THREEFRY: {arity: 2, cost: 8}", "  THREEFRY: {arity: 2, cost: high}", "high",
             "cost of THREEFRY must be a whole number >= 0, not 'high'"),
    "op name": ("  NOOP: {}", "  Noop: {}", "Noop", "op name 'Noop' must be UPPERCASE (letters, digits and '_')"),
    "group member": ("Movement: [RESHAPE,", "Movement: [RESHAP,", "RESHAP",
                     "group Movement names unknown op or group 'RESHAP' (did you mean 'RESHAPE'?)"),
    "group cycle": ("  ALU: [Unary, Binary, Ternary]", "  ALU: [Unary, Binary, Ternary, Elementwise]", "ALU",
                    "group cycle: ALU -> Elementwise -> ALU"),
    "built-in group": ("  Comparison: [", "  All: [", "All", "group All is built in and cannot be redefined"),
    "top-level key": ("groups:\n", "group:\n", "group", "unknown op table key 'group' (did you mean 'groups'?)"),
    "duplicate op": ("  NOOP: {}\n", "  NOOP: {}\n  NOOP: {}\n", "NOOP", "duplicate key 'NOOP' (first at line 15)"),
}


@pytest.mark.parametrize("case", OPS_CASES.values(), ids=OPS_CASES.keys())
def test_bad_op_table(tmp_path, monkeypatch, case):
    old, new, token, message = case
    path, bad = edited(tmp_path, monkeypatch, OPS, old, new, "ops.yaml")
    d = the_error(path)
    if old == "  NOOP: {}\n" and new.count("NOOP") == 2:  # the second occurrence is the duplicate
        bad = bad.replace("  NOOP: {}\n", "  XXXX: {}\n", 1)
    at_token(d, bad, token, message)


# ------------------------------------------------------------------ engine: egglog, by rule set

SYMBOLIC_STAGE = "  - name: symbolic\n    rules: [index_symbolic, reduce_collapse]\n    traversal: top_down\n"


NONE = """\
none:
  doc: one rule, whose result egglog cannot compute
  rules:
    - name: mul-one-if
      match: (MUL x 1)
      rewrite: (if {x.op is Ops.CONST} x x)
"""


def test_egglog_on_a_set_without_an_egglog_program(tmp_path, monkeypatch):
    (tmp_path / "none.yaml").write_text(NONE)
    path, bad = edited(tmp_path, monkeypatch, PIPELINE, SYMBOLIC_STAGE,
                       "  - name: symbolic\n    rules: [none]\n    engine: egglog\n", "pipeline.yaml")
    d = the_error(path)
    line = bad.split("\n")[d.loc.line - 1]
    assert line == "    rules: [none]" and d.loc.col == line.index("none") + 1
    assert d.message.startswith("rule set 'none' has no egglog program: none of its rules compiles to "
                                "egglog (mul-one-if: "), d.message


HALF = """\
half:
  doc: one rule egglog runs, one it cannot
  rules:
    - name: add-zero
      match: (ADD x 0)
      rewrite: x
    - name: mul-one-if
      match: (MUL x 1)
      rewrite: (if {x.op is Ops.CONST} x x)
"""


def test_egglog_on_a_set_egglog_runs_in_part_is_a_warning(tmp_path, monkeypatch):
    """The set is the pipeline folder's own: a stage may name the rule sets of its folder."""
    (tmp_path / "half.yaml").write_text(HALF)
    path, bad = edited(tmp_path, monkeypatch, PIPELINE, SYMBOLIC_STAGE,
                       "  - name: symbolic\n    rules: [half]\n    engine: egglog\n", "pipeline.yaml")
    project = compile_project([path])
    d = only(project.diagnostics, "warning")
    line = bad.split("\n")[d.loc.line - 1]
    assert line == "    rules: [half]" and d.loc.col == line.index("half") + 1
    # the reason in parentheses is the egglog emitter's
    assert d.message.startswith("on egglog, stage 'symbolic' runs 1 of the 2 rules of 'half'; left out: mul-one-if ("), \
        d.message
