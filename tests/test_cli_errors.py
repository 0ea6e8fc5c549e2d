"""The rulec command on bad input: `file:line:col: error:` with the source line and a caret, exit status 1,
and never a Python traceback; bad usage exits 2."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

import rulec

GOOD = """\
demo:
  rules:
    - name: add-zero
      match: (ADD x 0)
      rewrite: x
"""

BAD = {
    "unknown op": ("""
demo:
  rules:
    - name: a
      match: (ADDD x 0)
      rewrite: x
""", "bad.yaml:4:15: error: unknown op or group 'ADDD' (did you mean 'ADD'?)",
        "     4 |       match: (ADDD x 0)", "       |               ^~~~"),
    "invalid YAML": ("""
demo:
  rules:
    - name: a
      match: (ADD x 0
     rewrite: x
""", "bad.yaml:5:6: error: invalid YAML: did not find expected '-' indicator "
     "(while parsing a block collection at line 3)",
        "     5 |      rewrite: x", "       |      ^"),
    "unclosed paren": ("""
demo:
  rules:
    - name: a
      match: |
        (ADD
          (NEG x) 0
      rewrite: x
""", "bad.yaml:5:9: error: unclosed '('", "     5 |         (ADD", "       |         ^"),
    "unbound name": ("""
demo:
  rules:
    - name: a
      match: (ADD x 0)
      when: y.arg > 0
      rewrite: x
""", "bad.yaml:5:13: error: name 'y' is not bound by the pattern of rule 'a' (it binds x)",
        "     5 |       when: y.arg > 0", "       |             ^"),
    "callback module raises": ("""
demo:
  rules:
    - name: a
      match: (ADD x 0)
      call: exploding_callbacks:f
""", "bad.yaml:5:13: error: cannot import callback module 'exploding_callbacks': RuntimeError: boom",
        "     5 |       call: exploding_callbacks:f", "       |             ^"),
    "callback module exits": ("""
demo:
  rules:
    - name: a
      match: (ADD x 0)
      call: exiting_callbacks:f
""", "bad.yaml:5:13: error: cannot import callback module 'exiting_callbacks': SystemExit: 3",
        "     5 |       call: exiting_callbacks:f", "       |             ^"),
}


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rulec.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "exploding_callbacks.py").write_text("raise RuntimeError('boom')\n\n\ndef f(x):\n    return x\n")
    (tmp_path / "exiting_callbacks.py").write_text("import sys\nsys.exit(3)\n\n\ndef f(x):\n    return x\n")
    return tmp_path


# `rulec check` reads callback modules without running them (tests/test_callbacks_declared.py); the build imports them
CASES = [pytest.param(command, case, id=f"{name}-{command}") for name, case in BAD.items()
         for command in ("check", "build") if command == "build" or not name.startswith("callback")]


@pytest.mark.parametrize("command, case", CASES)
def test_error_is_reported_with_the_source_line(folder, command, case):
    text, first, source, caret = case
    (folder / "bad.yaml").write_text(text.lstrip("\n"))
    r = run(command, "bad.yaml", *(["-o", "out"] if command == "build" else []), cwd=folder)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert lines[:3] == [first, source, caret]
    assert lines[-1] == "1 error, 0 warnings"
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    assert not (folder / "out" / "demo.py").exists()


def test_every_error_of_every_file_is_reported(tmp_path):
    (tmp_path / "a.yaml").write_text(textwrap.dedent("""
        one:
          rules:
            - name: a
              match: (ADDD x 0)
              rewrite: x
            - name: b
              match: (MUL x 1)
              rewrite: y
    """).lstrip("\n"))
    (tmp_path / "b.yaml").write_text(textwrap.dedent("""
        two:
          include: [oen]
    """).lstrip("\n"))
    r = run("check", "a.yaml", "b.yaml", cwd=tmp_path)
    assert r.returncode == 1
    heads = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert heads == [
        "a.yaml:4:15: error: unknown op or group 'ADDD' (did you mean 'ADD'?)",
        "a.yaml:8:16: error: name 'y' is not bound by the pattern of rule 'b' (it binds x)",
        "b.yaml:2:13: error: include of unknown rule set 'oen' (did you mean 'one'?)",
    ]
    assert r.stderr.splitlines()[-1] == "3 errors, 1 warning"  # and b's capture 'x' is never used
    assert "Traceback" not in r.stderr


def test_errors_come_before_warnings(tmp_path):
    (tmp_path / "w.yaml").write_text(textwrap.dedent("""
        s:
          rules:
            - name: unused
              match: (ADD x y)
              rewrite: x
            - name: broken
              match: (NEGG x)
              rewrite: x
    """).lstrip("\n"))
    r = run("check", "w.yaml", cwd=tmp_path)
    assert r.returncode == 1
    heads = [ln for ln in r.stderr.splitlines() if ": error: " in ln or ": warning: " in ln]
    assert heads == [
        "w.yaml:7:15: error: unknown op or group 'NEGG' (did you mean 'NEG'?)",
        "w.yaml:4:21: warning: capture 'y' is never used (write _ to match without capturing)",
    ]


def test_warnings_alone_exit_0_and_1_with_werror(tmp_path):
    (tmp_path / "w.yaml").write_text(GOOD.replace("(ADD x 0)", "(ADD x y)"))
    r = run("check", "w.yaml", cwd=tmp_path)
    assert r.returncode == 0
    assert "w.yaml:4:21: warning: capture 'y' is never used" in r.stderr
    assert run("check", "--werror", "w.yaml", cwd=tmp_path).returncode == 1


def test_check_a_good_file(tmp_path):
    (tmp_path / "good.yaml").write_text(GOOD)
    r = run("check", "good.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "checked 1 file(s), 1 rule set(s), 1 rule(s): 0 errors, 0 warnings\n"


def test_check_reads_a_rule_file_from_standard_input(tmp_path):
    cli = [sys.executable, "-m", "rulec.cli", "check"]
    good = subprocess.run([*cli, "-"], input=GOOD, capture_output=True, text=True, cwd=tmp_path)
    assert good.returncode == 0 and good.stderr == "checked 1 file(s), 1 rule set(s), 1 rule(s): 0 errors, 0 warnings\n"
    bad = subprocess.run([*cli, "-"], input=BAD["unknown op"][0].lstrip("\n"), capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.splitlines()[:2] == ["<stdin>:4:15: error: unknown op or group 'ADDD' (did you mean 'ADD'?)",
                                           "     4 |       match: (ADDD x 0)"]
    not_utf8 = subprocess.run([*cli, "-"], input=b"demo: \xff\n", capture_output=True, cwd=tmp_path)
    assert not_utf8.returncode == 1 and b"<stdin>:1:7: error: not UTF-8 text: byte 0xff" in not_utf8.stderr
    twice = subprocess.run([*cli, "-", "-"], input="", capture_output=True, text=True, cwd=tmp_path)
    assert twice.returncode == 2 and "can be given once" in twice.stderr
    build = subprocess.run([sys.executable, "-m", "rulec.cli", "build", "-"], input=GOOD, capture_output=True,
                           text=True, cwd=tmp_path)
    assert build.returncode == 2 and "can only be checked" in build.stderr


def test_the_installed_script(tmp_path):
    script = shutil.which("rulec")
    if script is None:
        pytest.skip("the rulec script is not installed")
    (tmp_path / "bad.yaml").write_text(BAD["unknown op"][0].lstrip("\n"))
    r = subprocess.run([script, "check", "bad.yaml"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith(BAD["unknown op"][1] + "\n")
    assert "Traceback" not in r.stderr
    (tmp_path / "good.yaml").write_text(GOOD)
    assert subprocess.run([script, "check", "good.yaml"], capture_output=True, cwd=tmp_path).returncode == 0


def test_version():
    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.startswith(f"rulec {rulec.__version__} ")


def test_unknown_subcommand_is_a_usage_error():
    r = run("frobnicate")
    assert r.returncode == 2
    assert "invalid choice: 'frobnicate'" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_path_is_a_usage_error(tmp_path):
    r = run("check", "nowhere.yaml", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == "rulec: error: no such file or directory: nowhere.yaml\n"


def test_no_subcommand_is_a_usage_error():
    r = run()
    assert r.returncode == 2
    assert "usage: rulec" in r.stderr
