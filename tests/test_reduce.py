"""`rulec reduce PROG --until CMD` (issue 10 §3): delta debugging of a tensor program."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import shlex
import sys
import time
from pathlib import Path

import pytest

from rulec.tools import reduce
from rulec.tools.reduce import Reducer
from rulec.tools.reduce_edits import count_statements
from rulec.tools.reduce_judge import Verdict

SCRIPTS = Path(__file__).parent / "scripts"
PROG = SCRIPTS / "reduce_prog.py"
CHECK = f"{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPTS / 'reduce_check.py'))}"


def rulec_reduce(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rulec")
    reduce.add_parser(parser.add_subparsers())
    args = parser.parse_args(["reduce", *argv])
    return args.func(args)


def checker():
    spec = importlib.util.spec_from_file_location("reduce_check", SCRIPTS / "reduce_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_program_reduces_to_the_construct_that_fails(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    out = tmp_path / "small.py"
    # no `{}` in the command: the candidate's path is added at the end
    assert rulec_reduce(str(PROG), "--until", f"{CHECK} --log {log}", "-o", str(out)) == 0
    text = out.read_text()
    tree = ast.parse(text)
    assert checker().fails(tree)  # the result still fails
    original = PROG.read_text()
    assert count_statements(ast.parse(original)) >= 20
    assert count_statements(tree) <= 3 and len(text) * 10 < len(original), text
    assert ".pad(" in text and ".flip(" in text
    candidates = sorted(log.iterdir())
    assert len(candidates) > 10
    for candidate in candidates:  # every candidate the command saw was valid Python
        compile(candidate.read_text(), str(candidate), "exec")
    err = capsys.readouterr().err.strip()
    assert err.startswith("rulec: reduced ") and "\n" not in err  # one line
    assert f"{count_statements(ast.parse(original))} -> {count_statements(tree)} statements" in err
    assert f"{len(original)} -> {len(text)} characters" in err and f"{len(candidates)} tries" in err


def test_a_real_shape_error_is_kept_and_the_program_shrinks(tmp_path, capsys):
    out = tmp_path / "bug.py"
    prog = SCRIPTS / "reduce_shape_bug.py"
    rc = rulec_reduce(str(prog), "--until", f"{shlex.quote(sys.executable)} {{}}", "--match", "inner dimensions",
                      "-o", str(out))
    assert rc == 0
    text = out.read_text()
    assert count_statements(ast.parse(text)) <= 3 < count_statements(ast.parse(prog.read_text()))
    assert "@" in text or "matmul" in text
    with pytest.raises(ValueError, match="inner dimensions"):
        exec(compile(text, str(out), "exec"), {"__name__": "__main__"})


def test_numbers_shrink_toward_zero_and_keyword_arguments_go():
    # in-process judge: the failure needs rand's two sizes to differ and be at least 2
    def judge(text: str) -> Verdict:
        calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "rand"]
        sizes = [a.value for c in calls for a in c.args if isinstance(a, ast.Constant)]
        return Verdict(len(sizes) == 2 and sizes[0] != sizes[1] and min(sizes) >= 2, 1, 0.0)

    r = Reducer(judge, "x = Tensor.rand(64, 128, requires_grad=True, dtype=dtypes.float)\n", "p.py")
    r.run()
    assert r.text == "Tensor.rand(2, 3)\n"


def test_max_tries_bounds_the_runs_of_the_command():
    runs = []

    def judge(text: str) -> Verdict:
        runs.append(text)
        return Verdict("b" in text, 1, 0.0)

    source = "".join(f"v{i} = {i * 10}\n" for i in range(30)) + "b = 1\n"
    unbounded = Reducer(judge, source, "p.py", tries=lambda: len(runs))
    unbounded.run()
    assert unbounded.text == "b = 0\n"
    assert not unbounded.exhausted() and len(runs) > 3
    runs.clear()
    bounded = Reducer(judge, source, "p.py", max_tries=3, tries=lambda: len(runs))
    bounded.run()
    assert len(runs) == 3 and bounded.exhausted() and bounded.text != "b = 0\n"


def test_a_program_that_does_not_fail_is_an_error(tmp_path, capsys):
    out = tmp_path / "never.py"
    assert rulec_reduce(str(SCRIPTS / "tiny.py"), "--until", CHECK, "-o", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("rulec: error: tiny.py does not fail") and "it exits 0" in err
    assert not out.exists()


def test_a_command_that_ignores_the_candidate_is_an_error(tmp_path, capsys):
    assert rulec_reduce(str(PROG), "--until", "false", "-o", str(tmp_path / "x.py")) == 2
    assert "fails on an empty program too" in capsys.readouterr().err


def test_a_try_that_times_out_does_not_fail(tmp_path, capsys):
    t0 = time.perf_counter()
    assert rulec_reduce(str(PROG), "--until", "sleep 30 && test -f {}", "--timeout", "0.5", "-o", str(tmp_path / "x.py")) == 2
    assert time.perf_counter() - t0 < 10  # the sleeping command was killed
    assert "ran out of time (--timeout 0.5 s)" in capsys.readouterr().err
    # candidates without `linear` hang: they time out, so the reduction keeps `linear`
    prog, out = tmp_path / "small.py", tmp_path / "kept.py"
    prog.write_text("x = Tensor.rand(4, 4)\ny = x.linear(x).relu()\np = y.pad(((1, 1), (0, 0)))\n"
                    "z = (p * 2).flip(0)\n")
    t0 = time.perf_counter()
    assert rulec_reduce(str(prog), "--until", f"{CHECK} --hang-without linear {{}}", "--timeout", "1",
                        "-o", str(out)) == 0
    assert time.perf_counter() - t0 < 30
    text = out.read_text()
    assert "linear" in text and checker().fails(ast.parse(text))


def test_the_default_output_is_next_to_the_program(tmp_path, capsys):
    prog = tmp_path / "model.py"
    prog.write_text(PROG.read_text())
    assert rulec_reduce(str(prog), "--until", CHECK, "--max-tries", "5") == 0
    assert (tmp_path / "model.reduced.py").is_file()
    assert "stopped at --max-tries" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["missing.py", "--until", "false"], "missing.py: no such file"),
    ([str(SCRIPTS / "reduce_check.py"), "--until", "false", "--timeout", "0"], "--timeout 0: must be more than 0"),
    ([str(PROG), "--until", "false", "--match", "("], "not a regular expression"),
    ([str(PROG), "--until", "false", "--max-tries", "0"], "--max-tries 0: must be at least 1"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, message, capsys):
    assert rulec_reduce(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rulec: error: ") and message in err and err.count("\n") == 1


def test_a_program_that_is_not_python_is_an_error(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("x = (1,\n")
    assert rulec_reduce(str(bad), "--until", "false") == 2
    assert "bad.py:1: not valid Python" in capsys.readouterr().err
