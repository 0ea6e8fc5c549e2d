"""Issue 7, red team: hostile and careless rule files, command lines and API calls.

Every case ends in a clean `file:line:col: error:` (exit 1), a usage error (exit 2), a Python exception
naming the bad argument, or correct behaviour; never a traceback, a hang, or a file touched outside the
build. The last test mutates the shipped rule files at random and asserts the same of `rulec check`.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from budget import examples

import rulec
from rulec.cli import main
from rulec.compiler import compile_project
from rulec.diagnostics import CompileError
from rulec.reading import MAX_SOURCE_BYTES
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.genlib import ExprLimitError
from rulec.runtime.engine.helpers import bounded_mul
from rulec.runtime.ir.ops import Ops
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine.rewrite import RewriteError, graph_rewrite
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)


def cli(*argv: str) -> tuple[int, str]:
    """Run the rulec command in this process: (exit status, stderr). A traceback fails the test by itself."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, err.getvalue()


def rule(match: str = "(ADD x 0)", extra: str = "      rewrite: x\n") -> str:
    return f"demo:\n  rules:\n    - name: r\n      match: {match}\n{extra}"


# ------------------------------------------------------------------ rule files: diagnostics, not tracebacks

HOSTILE = {
    # (file text or bytes, expected exit status of `check`, a piece of the first diagnostic)
    "empty when": (rule(extra="      when:\n      rewrite: x\n"), 1, "r.yaml:5:12: error: `when:` has no value"),
    "null when": (rule(extra="      when: ~\n      rewrite: x\n"), 1, "r.yaml:5:13: error: `when:` has no value"),
    "empty match": (rule(match=""), 1, "r.yaml:4:13: error: `match:` has no value"),
    "null call": ("demo:\n  rules:\n    - name: r\n      match: x\n      call: ~\n", 1,
                  "r.yaml:5:13: error: `call:` has no value"),
    "false guard": (rule(extra="      when: 1 - 1\n      rewrite: x\n"), 0,
                    "r.yaml:5:13: warning: the guard of rule 'r' is always false: the rule never fires"),
    "None guard": (rule(extra="      when: None\n      rewrite: x\n"), 0,
                   "r.yaml:5:13: warning: the guard of rule 'r'"),
    "bad byte": (b"demo:\n  rules:\n    - name: r\n      match: (ADD x \xc3(0)\n      rewrite: x\n", 1,
                 "r.yaml:4:21: error: not UTF-8 text: byte 0xc3 (invalid continuation byte)"),
    "UTF-16": ("demo:\n  rules: []\n".encode("utf-16"), 1, "r.yaml:1:1: error: not UTF-8 text: byte 0xff"),
    "rules: 5": ("demo:\n  rules: 5\n", 1, "r.yaml:2:10: error: rules must be a list"),
    "name: [1]": ("demo:\n  rules:\n    - name: [1]\n      match: x\n      rewrite: x\n", 1,
                  "r.yaml:3:13: error: a rule name must be text"),
    "match: {a: b}": (rule(match="{a: b}"), 1, "r.yaml:4:14: error: match must be text"),
    "include: {x: 1}": ("demo:\n  include: {x: 1}\n  rules: []\n", 1,
                        "r.yaml:2:12: error: include takes rule-set names"),
    "callbacks: 3": ("callbacks: 3\n" + rule(), 1, "r.yaml:1:12: error: `callbacks` lists module names"),
    "python tag": ("demo: !!python/object/apply:os.system ['echo pwned']\n", 1, "r.yaml:1:7: error:"),
    "binary tag": ("demo:\n  doc: !!binary aGVsbG8=\n  rules: []\n", 1, "r.yaml:2:8: error: doc must be text"),
    "two documents": ("demo:\n  rules: []\n---\nother:\n  rules: []\n", 1, "r.yaml:3:1: error:"),
    "self include": ("demo:\n  include: [demo]\n  rules: []\n", 1, "r.yaml:2:13: error:"),
    "unicode op": (rule(match="'(ÄDD x 0)'"), 1, "r.yaml:4:16: error:"),
    "huge literal": (rule(match="'(ADD x 99999999999999999999999)'"), 0, ""),  # IR constants may hold it
    "dunder": (rule(extra="      when: x.__class__\n      rewrite: x\n"), 1,
               "r.yaml:5:14: error: attribute .__class__ is not readable"),
    "walrus": (rule(extra="      when: (y := 1)\n      rewrite: x\n"), 1, "r.yaml:5:14: error: ':=' is not allowed"),
    "string format": (rule(extra="      when: \"'%s' % 1\"\n      rewrite: x\n"), 1,
                      "error: string formatting with % is not allowed"),
    "graph loops 3 deep": (rule(match="s@SINK",
                                extra="      when: all(True for a in s.src for b in a.src for c in b.src)\n"
                                      "      rewrite: s\n"), 1,
                           "r.yaml:5:61: error: loops over the graph's data may nest at most 2 deep"),
    "helper arity": (rule(match="(ADD x c@CONST)", extra="      when: is_const(x, c)\n      rewrite: x\n"), 1,
                     "r.yaml:5:13: error: is_const() cannot take 2 arguments: too many positional arguments"),
    "huge pattern": (rule(match="'(SINK " + "x " * 3000 + ")'"), 1,
                     "r.yaml:4:14: error: pattern of 6007 characters; a match or rewrite may have at most 4096"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_rule_file_is_a_diagnostic(tmp_path, monkeypatch, case):
    text, status, first = HOSTILE[case]
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    rc, err = cli("check", "r.yaml")
    assert rc == status, err
    assert first in err, err
    rc_build, _ = cli("build", "-q", "-o", "out", "r.yaml")
    assert rc_build == (1 if status else 0)


def test_a_device_or_fifo_is_refused_not_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("rules").mkdir()
    Path("rules/good.yaml").write_text(rule())
    os.mkfifo("rules/pipe.yaml")  # reading it would block until a writer comes
    t0 = time.perf_counter()
    rc, err = cli("check", "rules")
    assert rc == 1 and "rules/pipe.yaml:1:1: error: cannot read the file: not a regular file" in err, err
    rc, err = cli("check", "/dev/zero")  # would never end
    assert rc == 1 and "/dev/zero:1:1: error: cannot read the file: not a regular file" in err, err
    assert time.perf_counter() - t0 < 10


def test_a_symlink_loop_is_a_read_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("rules").mkdir()
    os.symlink("b.yaml", "rules/a.yaml")
    os.symlink("a.yaml", "rules/b.yaml")
    rc, err = cli("check", "rules")
    assert rc == 1 and "rules/a.yaml:1:1: error: cannot read the file: Too many levels of symbolic links" in err, err


def test_an_oversized_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("big.yaml").write_text(rule() + "#" * MAX_SOURCE_BYTES + "\n")
    t0 = time.perf_counter()
    rc, err = cli("check", "big.yaml")
    assert rc == 1 and f"big.yaml:1:1: error: the file has {Path('big.yaml').stat().st_size} bytes; a rule file may " \
                       f"have at most {MAX_SOURCE_BYTES}\n" in err, err
    assert time.perf_counter() - t0 < 5


def test_many_rule_sets_and_includes_are_bounded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import rulec.check as check_mod

    # 300 sets, each including every earlier one: 45,000 includes, checked in linear time (was 18 s)
    sets = [rule().replace("demo:", "s0:")] + [f"s{i}:\n  include: [{', '.join(f's{j}' for j in range(i))}]\n"
                                               for i in range(1, 300)]
    Path("dense.yaml").write_text("".join(sets))
    t0 = time.perf_counter()
    assert cli("check", "-q", "dense.yaml") == (0, "")
    assert time.perf_counter() - t0 < 10  # a bound against the quadratic walk, with room for a loaded machine
    # building them is bounded: an error at the rule set that crosses a limit, before anything is generated
    monkeypatch.setattr(check_mod, "MAX_RULESETS", 100)
    rc, err = cli("build", "-q", "-o", "out", "dense.yaml")
    assert rc == 1 and "dense.yaml:204:1: error: too many rule sets: at most 100 in one build" in err, err
    monkeypatch.setattr(check_mod, "MAX_RULESETS", 300)
    monkeypatch.setattr(check_mod, "MAX_GENERATED_RULES", 50)
    rc, err = cli("build", "-q", "-o", "out", "dense.yaml")
    assert rc == 1 and "error: too many rules to generate: with its includes, rule set 's50' brings" in err, err
    assert not Path("out").exists()


# ------------------------------------------------------------------ the command line

def test_command_line_misuse(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text(rule())
    Path("empty").mkdir()
    assert cli("check", "empty") == (2, "rulec: error: no rule files (*.yaml) in empty\n")
    assert cli("build", "-o", "", "r.yaml") == (2, "rulec: error: -o needs a folder name, not an empty string\n")
    assert not Path("r.py").exists() and not Path("demo.py").exists()  # nothing built into the working dir
    # a file named twice (by itself and through its folder) is one file, not a duplicate rule set
    assert cli("check", "-q", "r.yaml", "./r.yaml", ".") == (0, "")
    # options between paths, as people type them
    assert cli("build", "-q", "r.yaml", "-o", "out", "--force")[0] == 0
    assert cli("show", "demo", "-o", "out", "r.yaml", "--rules")[0] == 0
    assert cli("check", "--bogus", "r.yaml")[0] == 2


def test_rule_file_text_cannot_send_escapes_to_the_terminal(tmp_path, monkeypatch):
    """Messages quote rule-file text, and `show` prints docs: control characters are shown escaped."""
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text('demo:\n  doc: "hi\\x1b[2J\\x07\\u202e"\n  rules:\n    - name: r\n'
                              '      match: "(A\\x1bD x 0)"\n      rewrite: x\n')
    rc, err = cli("check", "r.yaml")
    assert rc == 1 and "r.yaml:5:16: error: unknown op or group 'A\\x1bD'" in err and "\x1b" not in err, err
    Path("r.yaml").write_text(Path("r.yaml").read_text().replace("(A\\x1bD x 0)", "(ADD x 0)"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["show", "demo", "r.yaml", "--rules", "-o", "out"]) == 0
    assert ";; hi\\x1b[2J\\x07\\u202e\n" in out.getvalue() and "\x1b" not in out.getvalue()


def test_build_deletes_only_its_own_temp_files(tmp_path, monkeypatch):
    """`-o` may name a folder that holds the user's own files: an old dotfile there is not a temp file."""
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text(rule())
    home = Path("home")
    home.mkdir()
    dotfile, temp = home / ".bashrc", home / ".demo.py.x1y2z3.rulec-tmp"
    for f in (dotfile, temp):
        f.write_text("old")
        os.utime(f, (time.time() - 86400, time.time() - 86400))
    assert cli("build", "-q", "-o", "home", "r.yaml") == (0, "")
    assert dotfile.read_text() == "old" and not temp.exists()


def test_build_never_overwrites_files_it_did_not_write(tmp_path, monkeypatch):
    """`rulec build -o .` in a project folder: a rule set named `setup` or a web app's manifest.json."""
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text(rule().replace("demo:", "setup:"))
    for mine in ({"setup.py": "print('mine')\n"}, {"manifest.json": '{"name": "my app"}\n'}):
        for name, text in mine.items():
            Path(name).write_text(text)
        rc, err = cli("build", "-q", "-o", ".", "r.yaml")
        assert rc == 1 and f"refusing to overwrite {name}: it was not written by rulec" in err, err
        assert Path(name).read_text() == text
        Path(name).unlink()
    assert cli("build", "-q", "-o", ".", "r.yaml") == (0, "")  # its own files it rewrites, as always
    Path("manifest.json").write_text('{"rulec": "0", "truncat')  # a damaged manifest of its own: repaired
    assert cli("build", "-q", "--force", "-o", ".", "r.yaml") == (0, "")


# ------------------------------------------------------------------ rules that grow their own nodes

def reshape_sink() -> UOp:
    buf = UOp(Ops.BUFFER, dtypes.float32, (), 16)
    return UOp.sink(UOp(Ops.RESHAPE, dtypes.float32, (buf,), (4, 4)))


GROWING = {
    # a rule whose result feeds its own match again, bigger each time: (match, rewrite, graph, error)
    "arg doubles": ("r@(RESHAPE x)", "(replace r :arg {r.arg + r.arg})", reshape_sink, ExprLimitError),
    "arg nests": ("r@(RESHAPE x)", "(replace r :arg {(r.arg, r.arg)})", reshape_sink, ExprLimitError),
    "tag nests": ("r@(RESHAPE x)", "(replace r :tag {(r.tag, r.tag)})", reshape_sink, ExprLimitError),
    "tag chain": ("r@(RESHAPE x)", "(replace r :tag {(r.tag,)})", reshape_sink, ExprLimitError),
    "string tag doubles": ("r@(RESHAPE x)", "(replace r :tag {(r.tag or '%s%s') + (r.tag or '')})", reshape_sink,
                           ExprLimitError),
    "string formats itself": ("r@(RESHAPE x)", "(replace r :tag {(r.tag or '%s%s') % ('%s%s', '%s%s')})",
                              reshape_sink, ExprLimitError),
    "sink widens": ("(SINK ...s)", "(SINK ...s 0)", lambda: UOp.sink(x), RewriteError),
    "sink doubles": ("(SINK ...s)", "(SINK ...{s + s})", lambda: UOp.sink(x), RewriteError),
}


@pytest.mark.parametrize("case", list(GROWING))
def test_self_growing_rules_stop_with_an_error_naming_the_rule(rules, case):
    match, rewrite, graph, error = GROWING[case]
    rs = rules.load(f"""
        grow:
          rules:
            - name: grower
              match: "{match}"
              rewrite: "{rewrite}"
    """)
    t0 = time.perf_counter()
    with pytest.raises(error) as info:
        rs.rewrite(graph())
    assert time.perf_counter() - t0 < 5
    assert "grow/grower" in str(info.value)


def squaring_guard(levels: int) -> str:
    """A guard that squares a number once per nested comprehension: its bits double at every level."""
    expr = f"a{levels} > 0"
    for i in range(levels, 0, -1):
        expr = f"all({expr} for a{i} in [prod([a{i - 1}, a{i - 1}])])"
    return f"all({expr} for a0 in [c.arg + 2**100])"


def test_products_squared_level_after_level_stop(rules):
    # nested 30 deep: refused when checked (its loops read values of the graph)
    [d] = rules.errors(rule(match="(ADD x c@CONST)", extra=f"      when: \"{squaring_guard(30)}\"\n      rewrite: x\n"))
    assert "loops over the graph's data may nest at most 2 deep" in d.message
    # and the product itself is bounded at run time
    assert bounded_mul(2**511, 2**511) == 2**1022
    for square in ("int(1e300) * int(c.arg + 1e300)", "prod([int(1e300), int(c.arg + 1e300)])"):
        rs = rules.load(rule(match="(ADD x c@CONST)", extra=f"      when: {square} > 0\n      rewrite: x\n"))
        with pytest.raises(ExprLimitError, match="rule demo/r: .* has more than 1024 bits"):
            rs.rewrite(x + 3)


# ------------------------------------------------------------------ the Python API

def test_load_arguments_are_checked_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text(rule())
    for args, kwargs, error, message in [
        ((123,), {}, TypeError, "name_or_path must be a str or a path, not int"),
        (("r.yaml",), {"name": 5}, TypeError, "name must be a str or None, not int"),
        (("r.yaml",), {"build_dir": ""}, ValueError, "build_dir is an empty string"),
        (("r.yaml",), {"rebuild": "no"}, TypeError, "rebuild must be True or False, not str"),
        (("missing.yaml",), {}, FileNotFoundError, "no such rule file: missing.yaml"),
        (("",), {}, rulec.loader.RuleSetNotFound, "no rule set named ''"),  # not the working directory
    ]:
        with pytest.raises(error, match=message):
            rulec.load(*args, **kwargs)
    assert not Path("demo.py").exists()


def test_load_takes_the_set_name_by_position_as_documented(tmp_path, monkeypatch):
    # rulec.load(path, name, build_dir, rebuild): the documented signature, positional arguments included
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text(rule())
    by_position = rulec.load("r.yaml", "demo", tmp_path / "out", True)
    assert by_position.name == "demo" and rulec.load("r.yaml", name="demo", build_dir=tmp_path / "out") is not None
    with pytest.raises(TypeError, match="name must be a str or None, not int"):
        rulec.load("r.yaml", 5)


def test_rewrite_arguments_are_checked_by_name(rules):
    rs = rules.load(rule())
    for engine in ("python", "egglog"):
        with pytest.raises(TypeError, match="the graph to rewrite must be a UOp, not int"):
            rs.rewrite(5, engine=engine)
    with pytest.raises(TypeError, match="the python engine takes no option 'iterations'"):
        rs.rewrite(x, iterations=3)
    with pytest.raises(TypeError, match="rules must be a Matcher or a loaded rule set, not dict"):
        graph_rewrite(x, {})
    with pytest.raises(TypeError, match="unsupported operand"):
        rs + 5
    for option, message in [({"iterations": -1}, "iterations must be an integer >= 0, not -1"),
                            ({"node_limit": 0}, "node_limit must be an integer >= 1, not 0"),
                            ({"time_limit": float("nan")}, "time_limit must be a number of seconds >= 0"),
                            ({"stats": []}, "stats must be a dict")]:
        with pytest.raises((TypeError, ValueError), match=message):
            rs.rewrite(x + 0, engine="egglog", **option)
    assert rs.rewrite(x + 0, engine="egglog", iterations=3) is x


# ------------------------------------------------------------------ a fuzzer over the shipped rule files

SHIPPED = sorted(p for p in rules_dir().rglob("*.yaml") if p.name not in ("ops.yaml", "pipeline.yaml"))
TOKENS = ["(", ")", "{", "}", "x", "ADD", "...", "@", "|", "!", ":arg", ":dtype", ":tag", "0", "-1", "1e400", "nan",
          "99999999999999999999999", "\"", "'", "\\", "\t", "\n", "#", ":", "- ", "[", "]", "&a", "*a", "<<: *a",
          "!!binary", "\ufeff", "é", "x.__class__", "lambda", " for y in range(10**9)", "**", "%", "replace", "None",
          "_", "CONST", "(SINK ...s)", "name:", "match:", "rewrite:", "when:", "call:", "include:", "rules:", "~"]
VALUES = ["5", "[1]", "{a: b}", "null", "''", "[]", "{}", "!!binary aGk=", "*x", "&x 1", "|", "- a", "\"\\x00\""]


def mutate(text: str, rng: random.Random) -> str:
    """A few edits that keep most of the file's structure: tokens in, spans out, lines copied, values swapped."""
    for _ in range(rng.randint(1, 4)):
        i, kind = rng.randrange(len(text) + 1), rng.random()
        if kind < 0.4:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif kind < 0.6:
            text = text[:i] + text[i + rng.randint(1, 20):]
        elif kind < 0.75:
            lines = text.split("\n")
            lines[rng.randrange(len(lines))] = rng.choice(lines)
            text = "\n".join(lines)
        elif kind < 0.9:
            lines = text.split("\n")
            k = rng.randrange(len(lines))
            if ": " in lines[k]:
                lines[k] = lines[k].split(": ", 1)[0] + ": " + rng.choice(VALUES)
            text = "\n".join(lines)
        else:
            text = text[:i]
    return text


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(SHIPPED) - 1))
def test_mutated_shipped_rule_files_give_diagnostics_or_succeed(tmp_path, seed, which):
    src = SHIPPED[which]
    f = tmp_path / src.name
    f.write_text(mutate(src.read_text(), random.Random(seed)))
    try:
        compile_project([f])
    except CompileError as e:
        assert all(d.loc is None or d.loc.file.endswith(src.name) for d in e.diagnostics)
        assert all(":" in d.render() for d in e.diagnostics)
        event("refused with diagnostics")
    else:
        event("checked clean")


# ------------------------------------------------------------------ a fuzzer of guards and computed results

ATOMS = ["x", "c", "c.arg", "x.src", "x.vmax", "c.dtype", "0", "1", "-1", "2**63", "0.5", "1e308", "'a'", "None",
         "True", "()", "x.op", "Ops.ADD", "dtypes.int8", "x.src[0]"]
BINOPS = ["+", "-", "*", "//", "%", "/", "**", "<<", ">>", "&", "|", "==", "<", "and", "or", "in", "is not"]
CALLS = ["len", "max", "min", "sum", "abs", "int", "tuple", "sorted", "all", "range", "prod", "c_div", "ceil_div",
         "fits_int64", "is_const", "const_like", "identity_element", "argsort", "zip", "fits_dtype"]


@st.composite
def expressions(draw, depth: int = 0) -> str:
    kind = draw(st.integers(0, 6 if depth < 3 else 0))
    if kind == 0:
        return draw(st.sampled_from(ATOMS))
    if kind in (1, 2):
        return f"({draw(expressions(depth + 1))} {draw(st.sampled_from(BINOPS))} {draw(expressions(depth + 1))})"
    if kind == 3:
        args = draw(st.lists(expressions(depth + 1), min_size=1, max_size=3))
        return f"{draw(st.sampled_from(CALLS))}({', '.join(args)})"
    if kind == 4:
        source = draw(st.sampled_from(["x.src", "range(3)", "(1, 2)"]))
        return f"[a for a in {source} if {draw(expressions(depth + 1))}]"
    if kind == 5:
        return f"({draw(expressions(depth + 1))} if {draw(expressions(depth + 1))} else {draw(expressions(depth + 1))})"
    return f"{draw(expressions(depth + 1))}[{draw(st.sampled_from(['0', '-1', '1:', '::-1']))}]"


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(guard=expressions(), result=expressions())
def test_random_guards_and_results_compile_or_fail_cleanly(tmp_path_factory, guard, result):
    """Whatever the expressions, build is a diagnostic or a build, and a rewrite is a result or an error that
    names the rule (egglog may decline a rule it cannot translate: EngineError)."""
    import json

    from rulec.build import build
    from rulec.ruleset import EngineError

    root = tmp_path_factory.mktemp("expr")
    f = root / "r.yaml"
    f.write_text(f"demo:\n  rules:\n    - name: r\n      match: (ADD|MUL x c@CONST)\n      when: {json.dumps(guard)}\n"
                 f"      rewrite: {json.dumps('(ADD x {' + result + '})')}\n")
    try:
        build([f], root / "out")
    except CompileError:
        event("refused at check time")
        return
    rs = rulec.load(f"{f}:demo", build_dir=root / "out")
    for engine in ("python", "egglog"):
        try:
            rs.rewrite(UOp.sink(x + 3, x * -2), engine=engine)
            event(f"{engine}: rewrote")
        except (RewriteError, EngineError):
            event(f"{engine}: engine error")
        except Exception as e:  # a guard or result that fails at run time: the error names the rule
            assert "rule demo/r" in str(e), repr(e)
            event(f"{engine}: run-time error naming the rule")
