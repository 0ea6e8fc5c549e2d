"""The shape of generated matchers (Go rulegen style): one function per root op, its sources unpacked once,
a switch on the first source's op where many rules test it, no unused local, guard values reused."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rulec.build import build
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import OP_INFO, Ops
from rulec.runtime.ir.uop import UOp

ROOT = Path(__file__).resolve().parent.parent
x = UOp.variable("x", 0, 10)

MANY_ADDS = """
    s:
      rules:
        - name: add-const-const
          match: (ADD a@CONST b@CONST)
          rewrite: "{a.arg + b.arg}"
        - name: add-neg
          match: (ADD (NEG y) z)
          rewrite: (SUB z y)
        - name: add-mul-one
          match: (ADD (MUL y 1) z)
          rewrite: (ADD y z)
        - name: add-sub-back
          match: (ADD (SUB y z) w)
          when: w is z
          rewrite: y
        - name: add-zero
          match: (ADD y 0)
          rewrite: y
        - name: add-const-last
          match: (ADD c@CONST y)
          rewrite: (ADD y c)
"""


def functions(code: str) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in ast.parse(code).body if isinstance(f, ast.FunctionDef)}


def unused_locals(fn: ast.FunctionDef) -> set[str]:
    """Names the function assigns and never reads (`_` is the unpacking placeholder)."""
    stored, loaded = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (stored if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stored.add(node.name)
    return stored - loaded - {"_"}


def src_unpacks(fn: ast.FunctionDef) -> int:
    """How many statements read the root's whole source tuple (`... = n.src`)."""
    return sum(1 for node in ast.walk(fn) if isinstance(node, ast.Assign) and ast.unparse(node.value) == "n.src")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build")
    build(None, out)  # rulec's own rules
    return out


def test_one_function_per_root_op_with_a_switch_on_the_first_source(rules):
    rs = rules.load(MANY_ADDS)
    code = (rules.root / "build1" / "s.py").read_text()
    fns = functions(code)
    assert [name for name in fns if name.startswith("op_")] == ["op_ADD"]
    add = ast.unparse(fns["op_ADD"])
    assert src_unpacks(fns["op_ADD"]) == 1
    assert "_o = n_0.op" in add and "if _o is Ops.CONST:" in add and "elif _o is Ops.NEG:" in add
    assert rs.matcher.fast[Ops.ADD][0][1].__name__ == "op_ADD"
    # the switch keeps rule order and first-match: add-const-const (rule 0) before add-const-last (rule 5)
    assert rs.rewrite(UOp.const(dtypes.index, 2) + UOp.const(dtypes.index, 3)) is UOp.const(dtypes.index, 5)
    assert rs.rewrite(UOp.const(dtypes.index, 2) + x) is x + 2
    assert rs.rewrite((-x) + x) is UOp(Ops.SUB, dtypes.index, (x, x))
    assert rs.rewrite((x - 3) + 3) is x  # a rule with a guard, in its case
    assert rs.rewrite((x * 1) + 0) is x  # add-mul-one first, then add-zero (the default case)


def test_a_guard_value_is_computed_once_and_reused_in_the_result(rules):
    rs = rules.load("""
        s:
          rules:
            - name: halve
              match: (MUL y c@CONST :dtype index)
              when: c_div(c.arg, 2) > 1
              rewrite: (ADD (MUL y {c_div(c.arg, 2)}) (MUL y {c_div(c.arg, 2)}))
    """)
    code = (rules.root / "build1" / "s.py").read_text()
    fns = functions(code)
    for name in [n for n in fns if n.startswith("r0_")]:  # a rule function per order of MUL's sources
        assert ast.unparse(fns[name]).count("h_c_div(") == 1, name
    mul = ast.unparse(fns["op_MUL"])
    assert mul.count("h_c_div(") == mul.count("_rid = 0") == 2  # once per variant's block
    assert rs.rewrite(x * 6) is (x * 3) + (x * 3)
    assert rs.rewrite(x * 2) is x * 2


def test_shipped_matchers_have_no_unused_local_and_unpack_sources_once(shipped):
    modules = sorted(shipped.glob("*.py"))
    assert len(modules) > 10
    switches = 0
    for path in modules:
        for name, fn in functions(path.read_text()).items():
            assert not unused_locals(fn), (path.name, name, unused_locals(fn))
            if name.startswith("op_") and name != "op_any" and OP_INFO[Ops[name[3:]]].arity is not None:
                # a fixed source count: unpacked once; a variable one is read under each rule's length check
                assert src_unpacks(fn) <= 1, (path.name, name)
                switches += "_o = " in ast.unparse(fn)
    assert switches >= 5  # symbolic's ALU ops and rangeify's INDEX switch on their first source


def test_each_op_table_covers_exactly_the_root_ops_of_its_rules(shipped):
    import importlib.util

    for stem in ("symbolic", "reduce_collapse", "lift_invalid"):
        spec = importlib.util.spec_from_file_location(f"gen_style_{stem}", shipped / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        roots = set().union(*(ops for ops, _, _ in mod.ENTRIES if ops is not None))
        assert set(mod.OPS) == roots
        assert all(fn.__name__ == f"op_{op.name}" for op, fn in mod.OPS.items())


def test_only_calls_a_guard_always_makes_are_hoisted():
    from rulec.emit_python import FAIL, RET, _reuse_guard_values

    guard = "v_x > 0 and h_f(v_x) < h_g(h_f(v_x)) < h_k(v_x) and (v_y or h_m(v_x))"
    lines = _reuse_guard_values([f"if not ({guard}): {FAIL}", f"{RET}h_f(v_x) + h_g(h_f(v_x)) + h_k(v_x) + h_m(v_x)"],
                                0, guard)
    # the conjuncts in order; h_k (after a chained comparison) and h_m (under `or`) may not run: not hoisted
    assert lines == [f"if not (v_x > 0): {FAIL}", "_g0 = h_f(v_x)", "_g1 = h_g(_g0)",
                     f"if not (_g0 < _g1 < h_k(v_x)): {FAIL}", f"if not (v_y or h_m(v_x)): {FAIL}",
                     f"{RET}_g0 + _g1 + h_k(v_x) + h_m(v_x)"]
