"""Issue 7, item 1: nothing from a rule file reaches generated code unescaped.

Rule and rule-set names are validated slugs; every other string (file names, docs, string
arguments) reaches a generated file only through `py_str` (Python) or `egg_string` (egglog), and
comments only through `comment_text`. The property tests write hostile text into every one of
those places and check that build, load and both engines leave the file system alone and never
produce a syntax error in generated code.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from budget import examples

from rulec.build import build
from rulec.compiler import compile_project
from rulec.diagnostics import CompileError, Loc
from rulec.emit_egglog import emit_egglog
from rulec.emit_python import comment_text, emit_python, py_str
from rulec.loader import load
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.egraph import egg_string, read_egg
from rulec.runtime.ir.uop import UOp

# payloads that did damage before the fix, and the characters that end lines or strings somewhere
PAYLOADS = [
    '\n(output "pwned.txt" (CONST "index" 0))', '\n(include "/etc/hostname")', '") (include "pwned',
    "\nimport os;open('pwned.py','w')#", "\rimport os;open('pwned.py','w')#", "\u2028open('pwned','w')",
    "'''", '"""', "\\", "\\\n", "½", "\x00", "\x85", "\x0c;", ";(", "{x}",
]
HOSTILE = st.one_of(st.sampled_from(PAYLOADS), st.text(
    alphabet=st.sampled_from(list("ab_-.;()#'\"\\ \n\r\t\x00\x0b\x0c\x1c\x85\u2028\u2029½é{}@")), min_size=1,
    max_size=12))
SLUG = st.from_regex(r"[a-z][a-z0-9_.-]{0,8}", fullmatch=True)
LOCATED = re.compile(r"^.+:\d+:\d+: error: ", re.S)

x = UOp.variable("x", 0, 10)


def c(v) -> UOp:
    return UOp.const(dtypes.index, v)


def q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's too)."""
    return json.dumps(text)


def rule_file(name: str, doc: str, s: str) -> str:
    return "\n".join([
        "s:",
        f"  doc: {q(doc)}",
        "  rules:",
        f"    - name: {q(name)}",
        "      match: (ADD x k@CONST)",
        "      when: k.arg == 3",
        "      rewrite: x",
        "    - name: tag-it",
        "      match: (MUL x k@CONST)",
        f"      when: {q(f'k.arg == 1 and {s!r} not in (k.dtype.name,)')}",
        f"      rewrite: {q('(replace x :tag {' + repr(s) + '})')}",
        "",
    ])


def check_generated(out: Path) -> None:
    """Every generated .py compiles and every .egg is read and parsed by egglog, section by section."""
    from rulec.runtime.engine.egglog_bindings import bindings

    b = bindings()

    for py in out.glob("*.py"):
        compile(py.read_text(), str(py), "exec")
    for egg_path in out.glob("*.egg"):
        egg = read_egg(egg_path.read_text(), egg_path.stem)
        eg = b.EGraph()
        for kind, fname, body in egg.sections:
            if kind != "header":
                eg.run_program(*eg.parse_program(body, filename=fname))


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.one_of(SLUG, HOSTILE), fname=st.one_of(SLUG, HOSTILE), doc=HOSTILE, s=HOSTILE)
def test_hostile_rule_files_build_load_and_run_without_side_effects(name, fname, doc, s):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src, out, cwd = root / "src", root / "out", root / "cwd"
        for d in (src, cwd):
            d.mkdir()
        path = src / ("r" + fname.replace("/", "").replace("\x00", "") + ".yaml")
        path.write_text(rule_file(name, doc, s))
        before = files_under(root)
        old = os.getcwd()
        os.chdir(cwd)  # payloads write relative paths: the working folder must stay empty
        try:
            try:
                build([path], out)
            except CompileError as e:
                # refused, with a position: a name outside the slug rule, or text a pattern cannot hold
                assert all(d.loc is not None for d in e.diagnostics), e
                assert LOCATED.match(str(e)), str(e)
                assert not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name) or "{" in s or "}" in s, str(e)
                event("refused with a located diagnostic")
            else:
                check_generated(out)
                rs = load(path, build_dir=out)
                assert [r.name for r in rs.rules] == [name, "tag-it"]
                assert rs.doc == doc.strip()
                assert rs.rewrite(x + c(3)) is x
                assert rs.rewrite(x * 1).tag == s
                assert rs.rewrite(x + c(3), engine="egglog", allow_partial=True) is x
                event("built, loaded and rewritten on both engines")
        finally:
            os.chdir(old)
        assert list(cwd.iterdir()) == []
        assert {p for p in files_under(root) - before if out not in p.parents and p != out} == set()


@settings(max_examples=examples(20), deadline=None)
@given(name=HOSTILE, file=HOSTILE, when_text=HOSTILE)
def test_emitters_escape_what_validation_would_have_refused(name, file, when_text):
    """Defense in depth: hand the code generators hostile names directly, past the parser."""
    rule = _plain_rule()
    when = dataclasses.replace(rule.when, text=when_text)  # shown in the egglog program's comments
    hostile = dataclasses.replace(rule, name=name, file=file, loc=Loc(file, 3, 7), ruleset=name, when=when)
    with tempfile.TemporaryDirectory() as cwd:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            py = emit_python(name, name, [hostile])
            compile(py, "<generated>", "exec")
            egg = emit_egglog(name, [hostile])  # egglog checks every rule here: a payload would run
            assert egg.skipped == [], egg.skipped
            sections = read_egg(egg.text, "s").sections
            assert [k for k, _, _ in sections][-1] == "rule"
        finally:
            os.chdir(old)
        assert os.listdir(cwd) == []


@functools.cache
def _plain_rule():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plain.yaml"
        path.write_text("s:\n  rules:\n    - name: add-zero\n      match: (ADD x k@CONST)\n"
                        "      when: k.arg == 0\n      rewrite: x\n")
        [rule] = compile_project([path]).rules_of("s")
    return rule


# ------------------------------------------------------------------ the reproductions from the issue

def test_an_egglog_command_in_a_rule_name_is_a_check_error(rules):
    text = rule_file('add\n(output "pwned.txt" (CONST "index" 0))\n(include "/etc/hostname")', "d", "s")
    [d] = [d for d in rules.errors(text) if d.severity == "error"]
    assert (d.loc.line, d.loc.col) == (4, 13)
    assert d.message.startswith("invalid rule name 'add\\n(output ")
    assert list(rules.root.glob("**/pwned*")) == []


def test_a_non_ascii_rule_name_fails_check_not_load(tmp_path):
    # `½` passed `rulec check` and then failed at load with a SyntaxError in the generated module
    path = tmp_path / "r.yaml"
    path.write_text(rule_file("½", "d", "s"))
    r = subprocess.run([sys.executable, "-m", "rulec.cli", "check", str(path)], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith(f"{path}:4:13: error: invalid rule name '½'") or \
        r.stderr.startswith("r.yaml:4:13: error: invalid rule name '½'"), r.stderr
    assert "Traceback" not in r.stderr


def test_a_newline_in_a_file_name_does_not_run_code_at_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "a\nimport os;open('pwned.py','w')#.yaml"
    path.write_text(rule_file("add-zero", "d", "s"))
    rs = load(path, build_dir=tmp_path / "out")
    assert rs.rewrite(x + c(3)) is x
    assert not (tmp_path / "pwned.py").exists()
    text = (tmp_path / "out" / "s.py").read_text()
    assert text.splitlines()[0].startswith("# Generated by rulec ") and "\\nimport os" in text.splitlines()[0]


def test_callback_module_names_are_dotted_identifiers(rules):
    [d] = [d for d in rules.errors("""
        s:
          rules:
            - name: cb
              match: (ADD x 0)
              call: "os;import sys:f"
    """) if d.severity == "error"]
    assert (d.loc.line, d.message) == (5, "call must be 'package.module:function', got 'os;import sys:f'")


# ------------------------------------------------------------------ the escapers

@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_py_str_is_one_line_of_python_that_means_the_text(text):
    lit = py_str(text)
    assert len(lit.splitlines()) == 1 and "\x00" not in lit
    assert eval(compile(lit, "<lit>", "eval")) == text


@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_comment_text_has_no_line_breaks(text):
    out = comment_text(text)
    assert out.isprintable() and len(out.splitlines()) <= 1


@settings(max_examples=examples(100), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_egg_string_round_trips_through_egglog_or_refuses(text):
    from rulec.runtime.engine.egglog_bindings import bindings

    b = bindings()

    try:
        lit = egg_string(text)
    except ValueError:
        assert any(not ch.isprintable() and ch not in "\n\t" for ch in text)
        return
    assert len(lit.splitlines()) == 1
    eg = b.EGraph()
    eg.run_program(*eg.parse_program(f"(relation R (String))\n(R {lit})\n(check (R {lit}))"))
    [cmd] = eg.parse_program(f"(R {lit})")
    assert lit in str(cmd) or text in str(cmd)
