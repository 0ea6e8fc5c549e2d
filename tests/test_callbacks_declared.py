"""Callbacks are declared code: `call:` names a function *defined* in a module the rule file declares (or one
beside it); the standard library and builtins are refused; `rulec check` runs none of the module's code."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rulec.build import build
from rulec.runtime.engine.callback_import import CallbackImportError, load_defined
from rulec.compiler import compile_project
from rulec.diagnostics import CompileError
from rulec.runtime.engine.genlib import callback
from rulec.runtime.ir.uop import UOp

from test_checks import assert_diag, only

x = UOp.variable("x", 0, 10)


def calling(target: str, declare: str = "") -> str:
    return f"""
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: {target}
        {declare}
    """


@pytest.mark.parametrize("target", ["os:abort", "sys:exit", "builtins:eval", "subprocess:run", "os.path:join"])
def test_the_standard_library_is_refused(rules, target):
    d = only(rules.errors(calling(target)))
    assert_diag(d, 5, 13, f"callback '{target}' is in Python's standard library; only functions defined in declared "
                          f"callback modules may be called")


def test_declaring_a_standard_library_module_is_refused(rules):
    diags = rules.errors(calling("os:abort", "callbacks: [dsl_callbacks, os]"))
    decl = next(d for d in diags if d.loc.line == 6)
    assert_diag(decl, 6, 28, "'os' is part of Python's standard library; callbacks must be defined in your own "
                             "modules", 2)


def test_a_declared_module_on_the_path_may_be_called(rules):
    rs = rules.load(calling("dsl_callbacks:negate", "callbacks: [dsl_callbacks]"))
    assert rs.rewrite(x + 0) is -x


def test_a_module_on_the_path_must_be_declared(rules):
    d = only(rules.errors(calling("dsl_callbacks:negate")))
    assert_diag(d, 5, 13, "callback module 'dsl_callbacks' is not declared: list it under `callbacks:` at the top of "
                          "rules1.yaml, or put dsl_callbacks.py beside it")


def test_a_module_beside_the_rule_file_needs_no_declaration(rules):
    (rules.root / "beside_cb_a.py").write_text("def neg(x):\n    return -x\n")
    rs = rules.load(calling("beside_cb_a:neg"))
    assert rs.rewrite(x + 0) is -x


def test_a_declared_module_that_does_not_exist(rules):
    d = only(rules.errors("""
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
        callbacks: [no_such_module_xyz]
    """))
    assert_diag(d, 6, 13, "cannot find callback module 'no_such_module_xyz' (looked beside the file and on the "
                          "Python path)", 18)


@pytest.mark.parametrize("declaration, col, shown", [
    ("callbacks: [3]", 13, "'3'"), ("callbacks: [a-b]", 13, "'a-b'"), ("callbacks: [{a: b}]", 13, "a dict")])
def test_a_malformed_declaration(rules, declaration, col, shown):
    d = only(rules.errors(f"s:\n  rules:\n    - name: a\n      match: (ADD x 0)\n      rewrite: x\n{declaration}\n"))
    assert_diag(d, 6, col, f"`callbacks` lists module names (package.module), not {shown}")


@pytest.mark.parametrize("source, what", [
    ("from os import system as run_it\n", "imported into it, not defined there (line 1"),
    ("def run_it(x):\n    return x\n\n\nrun_it = print\n", "a variable, not a function (line 5"),
    ("async def run_it(x):\n    return x\n", "an async function (line 1"),
    ("try:\n    from os import system as run_it\nexcept ImportError:\n    pass\n", "bound inside a block (line 1"),
])
def test_the_function_must_be_a_def_in_the_module(rules, source, what):
    (rules.root / "beside_cb_b.py").write_text(source)
    d = only(rules.errors(calling("beside_cb_b:run_it")))
    assert_diag(d, 5, 13, f"'beside_cb_b:run_it' is {what} of beside_cb_b.py); a callback must be a def in the "
                          f"module it is named from")


def test_a_class_is_not_a_callback(rules):
    (rules.root / "beside_cb_c.py").write_text("class Node:\n    pass\n")
    d = only(rules.errors(calling("beside_cb_c:Node")))
    assert_diag(d, 5, 13, "'beside_cb_c:Node' is a class; a callback is a function")


def test_check_runs_no_callback_code_and_the_build_does(rules):
    marker = rules.root / "ran.txt"
    (rules.root / "beside_cb_d.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\n\ndef neg(x):\n    return -x\n")
    path = rules.write(calling("beside_cb_d:neg"))
    project = compile_project([path])
    assert not marker.exists() and project.rulesets["s"].rules[0].call.params == ("x",)
    r = subprocess.run([sys.executable, "-m", "rulec.cli", "check", str(path)], capture_output=True, text=True)
    assert r.returncode == 0 and not marker.exists(), r.stderr
    build([path], rules.root / "out")
    assert marker.exists()


def test_the_build_verifies_that_the_imported_name_is_defined_in_the_module(rules):
    # the source has a def, but the module rebinds the name when it runs: only the import can tell
    (rules.root / "beside_cb_e.py").write_text(
        "def f(x):\n    return x\n\n\nglobals()['f'] = __import__('os').getcwd\n")
    d = only(rules.errors(calling("beside_cb_e:f")))
    assert d.loc.line == 5 and d.message.startswith("'beside_cb_e:f' is not a function defined in module "
                                                    "'beside_cb_e' (it comes from '")


def test_loading_verifies_again_after_the_module_changed(tmp_path):
    # a callback module is not one of the hashed sources: the loaded matcher checks its callbacks itself
    (tmp_path / "beside_cb_f.py").write_text("def neg(x):\n    return -x\n")
    rule_file = tmp_path / "r.yaml"
    rule_file.write_text(textwrap.dedent(calling("beside_cb_f:neg")).lstrip("\n"))
    build([rule_file], tmp_path / "out")
    (tmp_path / "beside_cb_f.py").write_text("from os import getcwd as neg\n")
    code = (f"from rulec.loader import load\nload({str(rule_file)!r}, build_dir={str(tmp_path / 'out')!r})\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    # the loaded matcher refuses it, so loading rebuilds, and the build's check says where and why
    assert r.returncode != 0
    assert "CompileError" in r.stderr and "r.yaml:5:13: error: 'beside_cb_f:neg' is imported into it" in r.stderr


@pytest.mark.parametrize("module, function", [("os", "getcwd"), ("builtins", "eval"), ("dsl_callbacks", "UOp")])
def test_the_run_time_loader_refuses_what_is_not_defined_in_the_module(module, function):
    with pytest.raises(CallbackImportError):
        callback(module, function)
    assert load_defined("dsl_callbacks", "negate").__name__ == "negate"


def test_the_cli_reports_a_refused_callback_without_a_traceback(tmp_path):
    (tmp_path / "bad.yaml").write_text(textwrap.dedent(calling("builtins:eval")).lstrip("\n"))
    for command in (["check"], ["build", "-o", "out"]):
        r = subprocess.run([sys.executable, "-m", "rulec.cli", *command, "bad.yaml"], capture_output=True,
                           text=True, cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert r.stderr.startswith("bad.yaml:5:13: error: callback 'builtins:eval' is in Python's standard library")


def test_a_rule_set_cannot_be_named_callbacks(rules):
    with pytest.raises(CompileError):
        build([rules.write("callbacks:\n  rules:\n    - name: a\n      match: (ADD x 0)\n      rewrite: x\n")],
              rules.root / "out")


def test_check_imports_no_package_either(rules):
    # finding pkg.mod statically must not run pkg/__init__.py (importlib.util.find_spec would)
    marker = rules.root / "ran_init.txt"
    (rules.root / "cb_pkg_xyz").mkdir()
    (rules.root / "cb_pkg_xyz" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (rules.root / "cb_pkg_xyz" / "steps.py").write_text("def neg(x):\n    return -x\n")
    path = rules.write(calling("cb_pkg_xyz.steps:neg", "callbacks: [cb_pkg_xyz.steps]"))
    assert compile_project([path]).rulesets["s"].rules[0].call.params == ("x",)
    assert not marker.exists() and "cb_pkg_xyz" not in sys.modules
