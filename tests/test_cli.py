"""The rulec command on good input: build, check, show, --version."""
from __future__ import annotations

import subprocess
import sys

import rulec

RULES = """
demo:
  doc: a demo set
  rules:
    - name: add-zero
      match: (ADD x 0)
      rewrite: x
"""


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rulec.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith(f"rulec {rulec.__version__} (egglog ")


def test_build_then_up_to_date(tmp_path):
    (tmp_path / "demo.yaml").write_text(RULES)
    r = run("build", "demo.yaml", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "built 1 rule set(s), 0 up to date" in r.stderr
    assert (tmp_path / "out" / "demo.py").exists() and (tmp_path / "out" / "manifest.json").exists()
    r = run("build", "demo.yaml", "-o", "out", cwd=tmp_path)
    assert "built 0 rule set(s), 1 up to date" in r.stderr
    assert run("build", "-q", "demo.yaml", "-o", "out", cwd=tmp_path).stderr == ""


def test_check_writes_nothing(tmp_path):
    (tmp_path / "demo.yaml").write_text(RULES)
    r = run("check", "demo.yaml", cwd=tmp_path)
    assert r.returncode == 0 and "1 rule set(s), 1 rule(s): 0 errors, 0 warnings" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.yaml"]


def test_show_sections(tmp_path):
    (tmp_path / "demo.yaml").write_text(RULES)
    r = run("show", "demo", "demo.yaml", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "demo.yaml:5:13: demo/add-zero [rewrite]" in r.stdout
    assert "def r0_add_zero(n, ctx):" in r.stdout and "generated egglog" in r.stdout
    only = run("show", "demo", "demo.yaml", "-o", "out", "--rules", cwd=tmp_path)
    assert "def r0_add_zero" not in only.stdout and "demo/add-zero" in only.stdout
    missing = run("show", "dmeo", "demo.yaml", "-o", "out", cwd=tmp_path)
    assert missing.returncode == 1 and "did you mean demo" in missing.stderr


def test_warnings_and_werror(tmp_path):
    (tmp_path / "w.yaml").write_text(RULES.replace("rewrite: x", "rewrite: 0"))
    r = run("check", "w.yaml", cwd=tmp_path)
    assert r.returncode == 0 and "warning: capture 'x' is never used" in r.stderr
    assert run("check", "--werror", "w.yaml", cwd=tmp_path).returncode == 1


def test_no_command_prints_help():
    r = run()
    assert r.returncode == 2 and "usage: rulec" in r.stderr


def test_show_lists_disabled_and_fact_rules_by_kind(tmp_path):
    (tmp_path / "kinds.yaml").write_text("""
kinds:
  rules:
    - name: add-zero
      match: (ADD x 0)
      rewrite: x
    - name: off
      enabled: false
      match: (MUL x 1)
      rewrite: x
    - name: remember
      match: c@CONST
      fact: c
""")
    r = run("show", "kinds", "kinds.yaml", "-o", "out", "--rules", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "kinds/add-zero [rewrite]" in r.stdout
    assert "kinds/off [disabled]" in r.stdout and "kinds/remember [fact]" in r.stdout
