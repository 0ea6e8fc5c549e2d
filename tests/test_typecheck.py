"""Rewrites are type-checked: statically where the types are visible (errors and warnings at the rule's
file:line:col), at run time otherwise (a RuleError that starts with the rule's file:line and name)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

from rulec.compiler import compile_project
from rulec.runtime.ir.dtype import ALL_DTYPES, dtypes
from rulec.runtime.engine.genlib import RuleTypeError
from rulec.runtime.engine.matcher import RuleError
from rulec.runtime.ir.ops import Ops
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.engine.trace import tracing
from rulec.runtime.ir.uop import UOp
from rulec.typecheck import pattern_literal_types, rule_plan

x = UOp.variable("x", 0, 10)
y = UOp.variable("y", 0, 10)
f = UOp(Ops.DEFINE_VAR, dtypes.float32, (), ("f", 0, 1))


def one(diags: list, severity: str = "error"):
    found = [d for d in diags if d.severity == severity]
    assert len(found) == 1, "\n".join(d.render() for d in diags)
    return found[0]


def at(d, line: int, col: int, message: str) -> None:
    assert (d.loc.line, d.loc.col, d.message) == (line, col, message), d.render()


def one_rule(match: str, rewrite: str, when: str | None = None) -> str:
    guard = f"\n              when: {when}" if when else ""
    return f"""
        s:
          rules:
            - name: r
              match: {match}{guard}
              rewrite: {rewrite}
    """


def raised(rules, rs, node: UOp) -> RuleError:
    """The RuleError of rewriting `node`; it must name the rule's file:line and name."""
    with pytest.raises(RuleError) as info:
        rs.rewrite(node)
    err = info.value
    path = rules.root / f"rules{rules.count}.yaml"
    assert err.rule.file.endswith(path.name)
    assert str(err).startswith(f"{err.rule.file}:3: rule s/r: "), str(err)
    assert err.__cause__ is not None and isinstance(err, type(err.__cause__))
    return err


# ------------------------------------------------------------------ the reproductions of the issue

def test_bool_rewritten_to_an_index_is_an_error(rules):
    d = one(rules.errors(one_rule("(CMPLT x 5)", "x")))
    at(d, 5, 16, "the result has a different dtype than the matched node: the node is bool, the result "
                 "ints|floats (a result that names no :dtype keeps the matched node's)")


def test_result_dtype_checked_at_run_time_where_not_visible(rules):
    rs = rules.load(one_rule("(CMPLT x y)", "x"))
    err = raised(rules, rs, x < y)
    assert isinstance(err.__cause__, RuleTypeError)
    assert str(err).endswith("RuleTypeError: the result DEFINE_VAR has dtype index, but the matched CMPLT is bool "
                             "(a result that names no :dtype keeps the matched node's)")
    with tracing():  # the traced engine path reports it the same way
        assert str(raised(rules, rs, x < y)) == str(err)


def test_a_result_that_names_its_dtype_may_change_it(rules):
    rs = rules.load(one_rule("(CMPLT x y)", "(CAST x :dtype bool)"))
    assert rs.rewrite(x < y) is UOp(Ops.CAST, dtypes.bool, (x,))


def test_void_and_pointer_results_are_not_value_changes(rules):
    rs = rules.load(one_rule("(SINK x ...)", "x"))
    assert rs.rewrite(UOp.sink(x, y)) is x
    rs = rules.load(one_rule("(NOOP x)", "x"))
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), 0)
    assert rs.rewrite(UOp(Ops.NOOP, dtypes.float32, (g,))) is g
    assert "has dtype int32, but the matched NOOP is float32" in str(raised(rules, rs, UOp(Ops.NOOP, dtypes.float32, (
        UOp.const(dtypes.int32, 1),))))


def test_float_literal_into_an_int_is_an_error_where_visible(rules):
    d = one(rules.errors(one_rule("(MUL x 2 :dtype ints)", "(ADD x 0.5)")))
    at(d, 5, 23, "the constant 0.5 does not fit the dtype it gets here (ints)")


def test_float_literal_into_an_int_is_checked_at_run_time(rules):
    rs = rules.load(one_rule("(MUL x 2)", "(ADD x 0.5)"))
    assert rs.rewrite(f * 2) is f + UOp.const(dtypes.float32, 0.5)  # a float holds 0.5
    err = raised(rules, rs, x * 2)
    assert str(err).endswith("RuleTypeError: the constant 0.5 does not fit (a CONST of index)")


def test_computed_float_into_an_int_is_checked_at_run_time(rules):
    rs = rules.load(one_rule("(MUL x c@CONST)", '"{c.arg / 4}"'))
    assert rs.rewrite(x * 8) is UOp.const(dtypes.index, 2)  # 2.0 is an exact int
    assert "the constant 0.75 does not fit (a CONST of index)" in str(raised(rules, rs, x * 3))


def test_computed_node_result_checked_at_run_time(rules):
    # `x < y` on nodes builds a CMPLT (a bool), not a Python bool that would become a CONST of the ADD's dtype
    rs = rules.load(one_rule("(ADD x y)", '"{x < y}"'))
    assert "the result CMPLT has dtype bool, but the matched ADD is index" in str(raised(rules, rs, x + y))


def test_dtype_expression_of_an_int_is_an_error(rules):
    d = one(rules.errors(one_rule("(ADD x x)", "(ADD x x :dtype {x.vmax})")))
    at(d, 5, 33, ":dtype must be a dtype, but `x.vmax` is a number")


def test_dtype_expression_checked_at_run_time(rules):
    rs = rules.load(one_rule("(NEG x@DEFINE_VAR)", "(ADD x x :dtype {x.arg})"))
    err = raised(rules, rs, -x)
    assert str(err).endswith("RuleTypeError: :dtype must be a dtype, but the expression gave tuple ('x', 0, 10)")


def test_const_of_a_string_is_an_error(rules):
    d = one(rules.errors(one_rule("(SUB x x)", '(CONST :arg "hello")')))
    at(d, 5, 28, "the arg of a CONST must be a number or a bool, not 'hello'")
    d = one(rules.errors(one_rule("c@(CONST :dtype ints)", '(replace c :arg "hello")')))
    at(d, 5, 32, "the arg of a CONST must be a number or a bool, not 'hello'")
    d = one(rules.errors(one_rule("(SUB x x)", "'\"hello\"'")))
    at(d, 5, 17, "a constant must be a number or a bool, not 'hello'")


def test_const_arg_checked_at_run_time(rules):
    rs = rules.load(one_rule("(NEG x@DEFINE_VAR)", "(CONST :arg {x.arg})"))
    assert "the constant ('x', 0, 10) is not a number (a CONST of index)" in str(raised(rules, rs, -x))
    rs = rules.load(one_rule("(NEG c@CONST)", "(CONST :arg {c.arg * 2})"))
    assert rs.rewrite(-UOp.const(dtypes.float32, 1.5)) is UOp.const(dtypes.float32, 3.0)  # normalized like UOp.const


def test_replace_with_the_wrong_number_of_sources_is_an_error(rules):
    d = one(rules.errors(one_rule("n@(ADD a _)", "(replace n :src (a a a))")))
    at(d, 5, 25, "'n' is ADD, which takes 2 sources, but replace gives it 3")
    d = one(rules.errors(one_rule("n@(NEG|ADD a ...)", "(replace n :src (a a a))")))
    at(d, 5, 25, "'n' is NEG|ADD, which takes 1 or 2 sources, but replace gives it 3")


@pytest.mark.parametrize("guard, exc", [("x.vmax // (c.arg - c.arg) > 0", ZeroDivisionError),
                                        ("x.src[3] is None", IndexError)])
def test_a_guard_that_raises_names_the_rule(rules, guard, exc):
    rs = rules.load(one_rule("(ADD x c@CONST)", "x", when=guard))
    err = raised(rules, rs, x + 1)
    assert isinstance(err.__cause__, exc) and isinstance(err, exc)  # `except ZeroDivisionError` still works
    assert f": rule s/r: {exc.__name__}: " in str(err)


def test_a_callback_that_raises_names_the_rule(rules):
    rules.write("def boom(x):\n    raise KeyError('boom')\n", name="boom_callbacks.py")
    rs = rules.load("""
        s:
          rules:
            - name: r
              match: (NEG x)
              call: boom_callbacks:boom
    """)
    err = raised(rules, rs, -x)
    assert str(err).endswith("rule s/r: KeyError: 'boom'") and isinstance(err, KeyError)


def test_a_rule_error_of_a_nested_rewrite_is_not_wrapped_twice(rules):
    inner = rules.load(one_rule("(CMPLT x y)", "x"))

    def outer(n, ctx):
        return graph_rewrite(n.src[0], inner)

    from rulec.runtime.engine.matcher import Matcher, RuleInfo
    m = Matcher("outer", [RuleInfo("o", "outer", "outer.yaml", 1)], [(frozenset({Ops.NEG}), 0, outer)])
    with pytest.raises(RuleError) as info:
        graph_rewrite(-(x < y), m)
    assert info.value.rule.name == "r" and "outer" not in str(info.value)


# ------------------------------------------------------------------ patterns that can never match

@pytest.mark.parametrize("match, col, message", [
    ("x@(ADD x 0)", 21, "pattern can never match: 'x' would be one of its own sources"),
    ("(CMPLT _ _ :dtype float32)", 14, "pattern can never match: a comparison is a bool, but :dtype allows "
                                       "only float32"),
    ("(CONST :arg 2.5 :dtype ints)", 14, "pattern can never match: :dtype allows only ints, but a CONST of 2.5 "
                                         "can only be floats"),
    ('(CONST :arg "hello")', 14, "pattern can never match: a CONST holds a number or a bool, not 'hello'"),
    ("(WHERE (ADD _ 7) _ _)", 28, "pattern can never match: the condition of a WHERE is a bool, but a CONST of 7 "
                                  "can only be ints|floats"),
])
def test_patterns_that_can_never_match_warn(rules, match, col, message):
    at(one(rules.warnings(one_rule(match, "3")), "warning"), 4, col, message)


def test_patterns_that_can_match_do_not_warn(rules):
    for match in ("x@(ADD y 0)", "(CMPLT a _ :dtype bool)", "(CONST :arg 2.0 :dtype ints)", "(AND a True)",
                  "(WHERE (CMPLT _ 7) _ _)", "(ADD a 1 :dtype bool)"):
        diags = rules.warnings(one_rule(match, "0"))
        assert not [d for d in diags if "never match" in d.message], match


# ------------------------------------------------------------------ the shipped rules

def shipped_project():
    files = sorted(p for p in rules_dir().rglob("*.yaml") if p.name not in ("ops.yaml", "pipeline.yaml"))
    return compile_project(files)


def test_shipped_rules_have_no_type_diagnostics():
    typing = ("never match", "different dtype", "does not fit", "must be a dtype", "number or a bool", "replace gives")
    assert [d.render() for d in shipped_project().diagnostics if any(t in d.message for t in typing)] == []


def test_symbolic_rules_need_no_run_time_dtype_checks():
    # the hot rule set is typed statically: its generated matcher runs no extra checks
    plans = {r.name: rule_plan(r) for r in shipped_project().rules_of("symbolic")}
    assert [n for n, p in plans.items() if p.result_dtype or p.literals or p.dtype_exprs] == []


# ------------------------------------------------------------------ one notion of "fits"

@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from([d for d in ALL_DTYPES if d.kind != "void"]),
       st.one_of(st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                 st.sampled_from([0, 1, 0.0, 1.0, -0.0, 2.0, 0.5])))
def test_literal_pattern_types_agree_with_matching(dt, value):
    # the "can never match" warning is sound and complete for literals: a CONST of dt matches the literal
    # pattern (== its arg, True and False by identity) exactly when dt is one of the literal's types.
    # Only CONSTs the IR can hold count: an int constant out of its dtype's range is never built by a rule.
    try:
        arg = UOp.const(dt, value).arg
    except (OverflowError, ValueError):  # int(inf): no CONST of dt holds it
        arg = None
    if dt.kind in ("int", "uint", "index") and arg is not None and not dt.min <= arg <= dt.max:
        arg = None
    matches = arg is not None and (arg is value if isinstance(value, bool) else arg == value)
    assert (dt in pattern_literal_types(value)) == matches
