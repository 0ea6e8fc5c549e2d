"""`rulec run`, `rulec trace` and `rulec stats` (issue 10: the main job and the command-line tools)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rulec.cli import main
from rulec.runtime.engine.trace_json import TRACE_VERSION, load_trace
from rulec.runtime.tensor import realize
from rulec.tools.oracle import compare

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "scripts"
TINY = str(SCRIPTS / "tiny.py")


def test_run_prints_the_stage_and_kernel_tables_and_the_check(capsys):
    assert main(["run", TINY, "--check"]) == 0
    out, err = capsys.readouterr()
    assert "sum [20.0, 52.0, 84.0]" in out  # the script's own output, on stdout
    for title in ("stages", "kernels", "check against float64 numpy"):
        assert title in err
    assert "rangeify" in err and "tiny.py:8" in err and "tiny.py:10" in err
    assert "MISMATCH" not in err


def test_a_wrong_kernel_result_fails_the_check_naming_the_output(capsys, monkeypatch):
    real = realize.run_kernel

    def off_by_one(ast, arrays, var_vals, device):
        real(ast, arrays, var_vals, device)
        arrays[0][...] += 1  # a miscompiled kernel

    monkeypatch.setattr(realize, "run_kernel", off_by_one)
    assert main(["run", "-q", TINY, "--check"]) == 1
    err = capsys.readouterr().err
    assert "check failed for tiny.py:8, shape (3,) float32: largest difference 1" in err
    assert "float64 reference" in err


def test_a_failing_script_shows_its_own_traceback_and_exits_1(capsys):
    assert main(["run", "-q", str(SCRIPTS / "raises.py")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    first_frame = err.splitlines()[1]
    assert "raises.py" in first_frame  # no frames of rulec's runner or runpy before the script's
    assert "runpy" not in err
    assert "(2, 3)" in err and "(4, 5)" in err  # the shapes are named


def test_script_arguments_and_exit_status(capsys):
    assert main(["run", "-q", str(SCRIPTS / "exits.py"), "--", "3", "--check"]) == 3
    assert "args ['3', '--check']" in capsys.readouterr().out


def test_emit_writes_every_kernel_in_four_languages(tmp_path, capsys):
    assert main(["run", "-q", TINY, "--emit", str(tmp_path)]) == 0
    order = (tmp_path / "schedule.txt").read_text().split()
    names = order[0::2]
    assert len(names) >= 2
    for name in set(names):
        for ext in (".c", ".cl", ".cu", ".metal"):
            assert (tmp_path / f"{name}{ext}").read_text().strip(), f"{name}{ext}"
    assert "__global__" in (tmp_path / f"{names[0]}.cu").read_text()
    assert "kernel void" in (tmp_path / f"{names[0]}.metal").read_text()


def test_run_on_the_reference_interpreter(capsys):
    assert main(["run", TINY, "--device", "PYTHON", "--check"]) == 0
    assert "PYTHON" in capsys.readouterr().err


def test_run_on_a_device_instance(capsys, monkeypatch):
    assert main(["run", TINY, "--device", "CPU:1", "--check"]) == 0  # an instance runs on its backend's runner
    # CUDA runs where a GPU driver is (bench/cuda_check.sh on a GPU machine); without one it is refused
    from rulec.backends.cuda import runner

    monkeypatch.setattr(runner, "driver_present", lambda: False)
    assert main(["run", TINY, "--device", "CUDA:1"]) == 2
    err = capsys.readouterr().err
    assert "CUDA runs only where a GPU driver is" in err and "CUDA:1 kernels can be rendered with --emit" in err


def test_run_refuses_devices_it_cannot_run_and_missing_files(capsys):
    assert main(["run", TINY, "--device", "METAL"]) == 2
    err = capsys.readouterr().err
    assert "`rulec run` runs on CPU, CL, PYTHON and CUDA" in err and "--emit" in err
    assert main(["run", str(SCRIPTS / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_compare_tolerates_float_rounding_but_not_errors():
    ref = np.linspace(-3, 3, 100)
    assert compare("x", ref.astype(np.float32), ref).ok
    bad = ref.astype(np.float32)
    bad[17] += 0.01
    r = compare("x", bad, ref)
    assert not r.ok and "index (17,)" in r.detail and r.max_diff == pytest.approx(0.01, rel=1e-3)
    assert compare("n", np.array([np.nan, np.inf], np.float32), np.array([np.nan, np.inf])).ok
    assert not compare("n", np.array([np.nan, -np.inf], np.float32), np.array([np.nan, np.inf])).ok
    assert not compare("i", np.array([1, 2], np.int32), np.array([1, 3])).ok


def test_trace_lists_rewrites_with_rule_locations(capsys):
    assert main(["trace", TINY, "--stage", "rangeify"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    heads = [ln for ln in lines if ln.startswith("#")]
    assert heads and all("rangeify]" in h for h in heads)
    loc = heads[0].split()[-1]  # file:line:col of the rule
    file, line, col = loc.rsplit(":", 2)
    rule = heads[0].split()[-2].split("/")[1]
    assert rule in (ROOT / file).read_text().splitlines()[int(line) - 1]
    assert any(ln.strip().startswith("before n") for ln in lines)
    assert any(ln.strip().startswith("after  n") for ln in lines)


def test_trace_filters_by_rule_and_writes_json(tmp_path, capsys):
    assert main(["trace", TINY, "--rule", "rangeify/index-through-elementwise"]) == 0
    heads = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("#")]
    assert heads and all("rangeify/index-through-elementwise" in h for h in heads)
    out = tmp_path / "t.json"
    assert main(["trace", TINY, "--json", "-o", str(out)]) == 0
    data = load_trace(out)
    assert data["version"] == TRACE_VERSION and data["program"] == TINY
    assert [s["pipeline"] for s in data["stages"]][0] == "schedule/pipeline.yaml"


def test_stats_counts_hits_and_fails_on_dead_rules(capsys):
    assert main(["stats", TINY]) == 0
    out = capsys.readouterr().out
    assert "rangeify/index-through-elementwise" in out and "0 (dead)" in out
    assert main(["stats", "-q", TINY, "--fail-on-dead"]) == 1
    err = capsys.readouterr().err.splitlines()
    dead = [ln for ln in err if ": error: rule " in ln]
    assert dead and err[-1].startswith("rulec: ") and err[-1].endswith("dead rule(s)")
    file, line = dead[0].split(":")[:2]
    assert (ROOT / file).exists() and int(line) > 0


def test_stats_allow_list_keeps_itself_true(tmp_path, capsys):
    allow = tmp_path / "dead.txt"
    assert main(["stats", "-q", TINY, "--fail-on-dead"]) == 1
    dead = [ln.split("error: rule ")[1].split()[0] for ln in capsys.readouterr().err.splitlines() if "error: rule " in ln]
    allow.write_text("# expected\n" + "".join(f"{r}  # not reached by tiny.py\n" for r in dead))
    assert main(["stats", "-q", TINY, "--fail-on-dead", "--allow-dead", str(allow)]) == 0
    # a listed rule that fires, and a name that is no rule, are errors
    allow.write_text(allow.read_text() + "rangeify/index-through-elementwise  # wrong\nno/such-rule  # typo\n")
    assert main(["stats", "-q", TINY, "--fail-on-dead", "--allow-dead", str(allow)]) == 1
    err = capsys.readouterr().err
    assert "rangeify/index-through-elementwise is listed as dead but fired" in err
    assert "no/such-rule is not a rule of the pipelines" in err
    allow.write_text("rangeify/index-through-elementwise\n")  # no reason
    assert main(["stats", "-q", TINY, "--fail-on-dead", "--allow-dead", str(allow)]) == 2
    assert "expected `RULESET/NAME  # reason`" in capsys.readouterr().err


def test_the_readme_main_job_runs_and_passes_its_check(capsys):
    import shlex

    readme = (ROOT / "README.md").read_text()
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    main_job = block[0].split("&&")[-1].strip()
    assert main_job.startswith("rulec run ") and "--check" in main_job
    assert main([arg if not arg.endswith(".py") else str(ROOT / arg) for arg in shlex.split(main_job)[1:]]) == 0
    err = capsys.readouterr().err
    assert "check against float64 numpy" in err and "MISMATCH" not in err


# ------------------------------------------------------------------ rulec explain

PADDED = str(SCRIPTS / "padded.py")


# Each command in a process of its own, as from a shell: node ids name buffers by the order the program made
# them, so they are stable from one run of a program to the next, not across runs inside one process.

def _rulec(*argv):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "rulec.cli", *argv], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def padded_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "padded.json"
    assert _rulec("trace", PADDED, "--json", "-o", str(path)).returncode == 0
    return load_trace(path)


def _node(data, pred):
    return next(nid for nid, n in sorted(data["nodes"].items()) if pred(n, data["nodes"]))


def _ids_of(data, nids):
    return {id(data["nodes"][n]) for n in nids}


def _explain(capsys, *argv):
    done = _rulec("explain", *argv)
    return done.returncode, done.stdout, done.stderr


def _in_symbolic_stage(data):
    from test_trace_format import _reachable

    stage = next(s for s in data["stages"] if s["name"] == "symbolic")
    return _ids_of(data, _reachable(data["nodes"], stage["input"]))


def test_explain_shows_the_false_guard_with_its_values(padded_trace, capsys):
    there = _in_symbolic_stage(padded_trace)
    cmp = _node(padded_trace, lambda n, ns: n["op"] == "CMPLT" and ns[n["src"][0]]["op"] == "SUB"
                and ns[n["src"][1]]["op"] == "CONST" and ns[n["src"][1]]["arg"] == "4" and id(n) in there)
    status, out, _ = _explain(capsys, "lt-by-bounds-true", "--at", cmp, PADDED)
    assert status == 0
    assert "the pattern matches" in out and "the guard is false: `x.vmax < y.vmin`" in out
    assert "x.vmax = " in out and "y.vmin = 4" in out


def test_explain_names_the_deepest_failing_sub_pattern(padded_trace, capsys):
    there = _in_symbolic_stage(padded_trace)
    cmp = _node(padded_trace, lambda n, ns: n["op"] == "CMPLT" and ns[n["src"][0]]["op"] == "SUB" and id(n) in there)
    out = _explain(capsys, "symbolic/add-zero", "--at", cmp[:8], PADDED)[1]
    assert "the pattern does not match: the node: expected ADD, got CMPLT" in out
    out = _explain(capsys, "fold-binary", "--at", cmp, PADDED)[1]
    assert "the pattern does not match: source 0: expected CONST, got SUB" in out


def test_explain_says_when_an_earlier_rule_fired_first(padded_trace, capsys):
    rules = padded_trace["rules"]
    step = next(st for s in padded_trace["stages"] for st in s["steps"] if rules[st["rule"]]["name"] == "index-of-const")
    out = _explain(capsys, "unprocessed-index", "--at", step["before"], PADDED)[1]
    assert "a rule earlier in the set fired first: rangeify_mops/index-of-const" in out


def test_explain_says_when_the_node_did_not_exist(padded_trace, capsys):
    stages = padded_trace["stages"]
    rangeify = next(s for s in stages if s["name"] == "rangeify")
    made = rangeify["steps"][0]["after"]  # a node rangeify made, gone before the symbolic stages ran
    out = _explain(capsys, "symbolic/add-zero", "--at", made, PADDED)[1]
    assert "the node did not exist when these stages holding the rule ran: symbolic" in out


def test_explain_reports_unknown_rules_and_nodes(capsys):
    status, _, err = _explain(capsys, "no-such-rule", "--at", "n1234", PADDED)
    assert status == 2 and "no rule named 'no-such-rule'" in err
    status, _, err = _explain(capsys, "add-zero", "--at", "nffffffffffff", PADDED)
    assert status == 2 and "no node 'nffffffffffff'" in err


def test_why_gives_the_chain_of_rules_that_made_a_kernel(padded_trace):
    kernel = padded_trace["kernels"][0]["ast"]
    done = _rulec("why", kernel[:9], PADDED)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"node {kernel}") and lines[1].startswith("made from ")
    steps = [ln for ln in lines if ln[:5].strip().rstrip(".").isdigit()]
    assert len(steps) >= 3
    rules = {r["id"] for r in padded_trace["rules"]}
    for ln in steps:  # each step names a rule of the trace and its file:line:col
        rule, loc = ln.rsplit("] ", 1)[1].split()
        assert rule in rules and (ROOT / loc.split(":")[0]).exists()
    assert "rangeify/" in done.stdout and "bufferize_to_store/" in done.stdout
    assert _rulec("why", "nffffffff", PADDED).returncode == 2


def test_trace_and_why_read_trace_files(padded_trace, tmp_path):
    """RULEC_TRACE=FILE.json, `trace --json` and the tools share one format: a trace file prints exactly as a
    run does, and `why` answers from it."""
    path = tmp_path / "padded.json"
    path.write_text(json.dumps(padded_trace))
    from_run = _rulec("trace", PADDED, "--stage", "rangeify")
    from_file = _rulec("trace", str(path), "--stage", "rangeify")
    assert from_file.returncode == 0 and from_file.stdout == from_run.stdout and from_file.stdout
    kernel = padded_trace["kernels"][0]["ast"]
    assert _rulec("why", kernel, str(path)).stdout == _rulec("why", kernel, PADDED).stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    done = _rulec("trace", str(bad))
    assert done.returncode == 2 and "not a rulec trace" in done.stderr


def test_run_on_opencl(capsys):
    from opencl_probe import NO_CL

    if NO_CL is not None:
        pytest.skip(NO_CL)
    assert main(["run", TINY, "--device", "CL", "--check"]) == 0
    err = capsys.readouterr().err
    assert " CL " in err and "MISMATCH" not in err and "tiny.py:10" in err
