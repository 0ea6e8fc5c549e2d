"""One guard front end (rulec/exprs.py), two back ends: Python source and egglog (rulec/emit_egglog.py),
with the egglog forms of helpers in one table (rulec/egglog_forms.py)."""
from __future__ import annotations

import ast
import json
import re

from rulec.diagnostics import Loc
from rulec.egglog_forms import EGG_FORMS, FOLD_ALU, Macro, Prim, Special
from rulec.exprs import HELPERS, bind_names, parse_expr, ref
from rulec.runtime.engine.helpers import FOLDED_OPS
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import GROUPS, Ops
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)


def c(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def resolved(text: str, bound: set[str]):
    e = parse_expr(text, Loc("t.yaml", 1, 1))
    assert bind_names(e, bound) == []
    return e


def refs(e) -> list[tuple[str, str, object]]:
    return [(r.kind, r.name, r.value) for n in ast.walk(e.resolved) if (r := ref(n)) is not None]


def test_every_name_is_resolved_once_by_the_front_end():
    e = resolved("x.op is Ops.ADD and x.dtype == dtypes.int32 and x.op in GroupOp.ALU "
                 "and all(s.arg > k for s in x.src)", {"x", "k"})
    got = refs(e)
    assert ("op", "ADD", Ops.ADD) in got and ("dtype", "int32", dtypes.int32) in got
    assert ("group", "ALU", GROUPS["ALU"]) in got
    assert ("helper", "all", None) in got and ("bound", "k", None) in got
    assert {r for r in got if r[1] == "s"} == {("local", "s", None)}  # the loop's own variable, not a capture
    assert e.names == {"x", "k"} and e.helpers == {"all"}
    # the namespace member is resolved to the object itself (compared by identity downstream)
    (dt,) = [n for n in ast.walk(e.resolved) if ref(n) is not None and ref(n).kind == "dtype"]
    assert ref(dt).value is dtypes.int32


def test_python_back_end_reads_the_resolved_tree():
    e = resolved("max(a.arg, 1) ** 3 + len([s for s in a.src if s.op is Ops.CONST])", {"a"})
    assert e.python == "_op_pow(h_max(v_a.arg, 1), 3) + h_len([l_s for l_s in v_a.src if l_s.op is Ops.CONST])"
    # the tree the checker reads is left as written
    assert ast.unparse(e.tree) == "max(a.arg, 1) ** 3 + len([s for s in a.src if s.op is Ops.CONST])"


def test_the_egglog_forms_table():
    assert set(EGG_FORMS) <= set(HELPERS) and set(FOLD_ALU) == FOLDED_OPS
    assert all(isinstance(f, (Prim, Macro, Special)) for f in EGG_FORMS.values())
    # a macro's parameters are substituted by the argument trees, resolved names and all
    arg = resolved("c.src[1]", {"c"}).resolved.body
    body = EGG_FORMS["is_const"].expand([arg])
    assert ast.unparse(body) == "c.src[1].op is Ops.CONST"
    assert sorted(ref(n).kind for n in ast.walk(body) if ref(n) is not None) == ["bound", "namespace", "op"]
    guard, value = (m.expand([resolved("n", {"n"}).resolved.body]) for m in FOLD_ALU[Ops.SHR])
    assert ast.unparse(value) == "n.src[0].arg >> n.src[1].arg"
    assert "8 * n.src[0].dtype.itemsize" in ast.unparse(guard)
    # the primitive folds as the helper computes: c_div truncates, where Python's // floors
    assert EGG_FORMS["c_div"].fold(-7, 2) == -3 and EGG_FORMS["c_div"].fold(1, 0) is None


def rule_bodies(text: str) -> dict[str, list[str]]:
    """Each compiled rule's egglog rules, without their names."""
    out = {}
    for part in text.split(";; @rule ")[1:]:
        head, body = part.split("\n", 1)
        rules = re.findall(r"^\(rule .*?:ruleset rules", body, re.S | re.M)
        out[json.loads(head)["name"]] = rules
    return out


def test_a_macro_compiles_as_its_expansion_written_out(rules):
    rs = rules.load("""
        forms:
          rules:
            - name: by-helper
              match: (CMPLT (MUL x c1@CONST) c2@CONST)
              when: c1.arg > 0 and is_const(c2)
              rewrite: (CMPLT x {const_like(x, ceil_div(c2.arg, c1.arg))})
            - name: written-out
              match: (CMPLT (MUL x c1@CONST) c2@CONST)
              when: c1.arg > 0 and c2.op is Ops.CONST
              rewrite: (CMPLT x {const_like(x, -((-c2.arg) // c1.arg))})
            - name: op-unknown
              match: (ADD a b)
              when: is_const(b)
              rewrite: a
            - name: op-unknown-written-out
              match: (ADD a b)
              when: b.op is Ops.CONST
              rewrite: a
    """)
    assert rs.egglog_skipped == []
    bodies = rule_bodies(rs.egglog_path.read_text())
    assert bodies["by-helper"] == bodies["written-out"] and bodies["by-helper"]
    assert bodies["op-unknown"] == bodies["op-unknown-written-out"]
    assert "(= b (CONST" in bodies["op-unknown"][0]


def test_primitives_fold_constants_with_the_helpers_semantics(rules):
    rs = rules.load("""
        prims:
          rules:
            - name: folded
              match: (ADD x c@CONST)
              when: c.arg == c_div(-7, 2) + c_mod(-7, 2) + min(4, 9, 5) + abs(-2)
              rewrite: x
            - name: computed
              match: (MUL x c@CONST)
              when: max(c.arg, 1, 2) == c_mod(c.arg, 3)
              rewrite: x
    """)
    bodies = rule_bodies(rs.egglog_path.read_text())
    # -3 + -1 + 4 + 2 == 2: truncating division and remainder, as the Python matcher's c_div and c_mod
    assert all("(= _a2 2))" in b for b in bodies["folded"]) and len(bodies["folded"]) == 2
    assert "(= (max (max _a2 1) 2) (% _a2 3))" in bodies["computed"][0]
    assert rs.rewrite(x + c(2)) is x and rs.rewrite(x + c(-4)) is not x  # the Python matcher agrees
    assert rs.rewrite(x + c(2), engine="egglog") is x


def test_a_helper_without_a_form_is_named_in_the_skip(rules):
    rs = rules.load("""
        noform:
          rules:
            - name: uses-gcd
              match: (ADD a@CONST b@CONST)
              when: gcd(a.arg, b.arg) == 1
              rewrite: a
            - name: group
              match: (ADD a b)
              when: a.op in GroupOp.ALU
              rewrite: a
            - name: fine
              match: (ADD x 0)
              rewrite: x
    """)
    why = dict(rs.egglog_skipped)
    assert why["uses-gcd"] == "`gcd(a.arg, b.arg)`: gcd() has no egglog translation"
    assert "`in` needs a literal tuple" in why["group"]
