"""Issue 7, item 3: the expression language cannot hang or exhaust the toolkit.

What is unbounded on its face is an error at check time, at the offending subexpression; what
depends on the graph is bounded at run time by `ExprLimitError`, whose message names the rule.
"""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.genlib import RESULT_MAX, RESULT_MIN, ExprLimitError, check_result
from rulec.runtime.engine.helpers import (INT_BITS, SEQ_LIMIT, bounded_lshift, bounded_mul, bounded_pow, bounded_range,
                                          bounded_sum)
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)


def c(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def guard_rule(when: str, rewrite: str = "x") -> str:
    return f"""
        s:
          rules:
            - name: limited
              match: (ADD x k@CONST)
              when: {when}
              rewrite: {rewrite}
    """


def errors(rules, text: str) -> list:
    return [d for d in rules.errors(text) if d.severity == "error"]


# ------------------------------------------------------------------ refused at check time

@pytest.mark.parametrize("when, col, length, message", [
    ("9**9**9 > 0", 13, 7, "too large: 9 ** 387420489 has more than 128 bits"),
    ("sum(range(10**12)) > 0", 17, 13, "too large: range(1000000000000) has more than 4096 numbers"),
    ("k.arg != 'a'*10**10", 22, 10, "too large: a str of 1 repeated 10000000000 times has more than 4096 items"),
    ("(1 << 10**10) > 0", 14, 11, "too large: 1 << 10000000000 has more than 128 bits"),
    ("min(1 << 40000000000, 2) == 2", 17, 16, "too large: 1 << 40000000000 has more than 128 bits"),
    ("k.arg > 0 and [0] * 5000", 27, 10, "too large: a list of 1 repeated 5000 times has more than 4096 items"),
    ("k.arg != '%0999999999d' % 1", 22, 18, "string formatting with % is not allowed in rule expressions"),
])
def test_statically_unbounded_guards_are_check_errors(rules, when, col, length, message):
    t0 = time.perf_counter()
    [d] = errors(rules, guard_rule(when))
    assert time.perf_counter() - t0 < 10
    assert (d.loc.line, d.loc.col, d.length, d.message) == (5, col, length, message), d.render()


def test_a_constant_result_past_the_limit_is_a_check_error_not_an_egglog_crash(rules):
    # `rulec build` used to crash folding this constant for the egglog program
    [d] = errors(rules, guard_rule("k.arg > 0", '"{min(1 << 40000000000, 2)}"'))
    assert (d.loc.line, d.loc.col) == (6, 22) and d.message.startswith("too large: 1 << 40000000000")


def test_nested_loops_over_built_sequences_are_refused(rules):
    [d] = errors(rules, guard_rule("all(i != j for i in range(k.arg) for j in range(k.arg))"))
    assert d.message.startswith("nested loops over range() or repeated sequences may run more than 4096")
    assert (d.loc.line, d.loc.col) == (5, 55)


@pytest.mark.parametrize("n", [300, 5000])
def test_deeply_nested_expressions_are_check_errors_not_recursion_errors(rules, n):
    [d] = errors(rules, guard_rule("k.arg" + " + 1" * n + " > 0"))
    assert (d.loc.line, d.loc.col, d.message) == (5, 13, "expression nested more than 200 levels deep")


def test_small_nested_loops_and_loops_over_the_graph_are_fine(rules):
    rs = rules.load(guard_rule("sum(i * j for i in range(3) for j in range(4)) == 18 and "
                               "all(a is b or a is not b for a in k.src for b in k.src) and "
                               "len(tuple(range(k.arg))) == k.arg"))
    assert rs.rewrite(x + c(5)) is x


# ------------------------------------------------------------------ bounded at run time, naming the rule

def _limit_error(rs, graph) -> str:
    t0 = time.perf_counter()
    with pytest.raises(ExprLimitError) as info:
        rs.rewrite(graph)
    assert time.perf_counter() - t0 < 5
    return str(info.value)


def test_a_result_that_squares_a_constant_at_every_step_stops_with_the_rule(rules):
    rs = rules.load(guard_rule("k.arg > 1", "(ADD x {k.arg * k.arg})"))
    msg = _limit_error(rs, x + c(3))
    assert msg.startswith("rules1.yaml:3: rule s/limited: a result holds an integer of ")
    assert "the IR holds 64-bit integers" in msg


@pytest.mark.parametrize("when, message", [
    ("(1 << k.arg) > 0", "1 << 1000000 has more than 128 bits"),
    ("3 ** k.arg > 0", "3 ** 1000000 has more than 128 bits"),
    ("len([0] * k.arg) > 0", "a list of 1 repeated 1000000 times has more than 4096 items"),
    ("len(range(k.arg)) > 0", "range(1000000) has more than 4096 numbers"),
    ("k.arg > 0 and len(sum([[0] * 1000 for i in range(5)], [])) > 0", "sum() of sequences has more than 4096 items"),
])
def test_guards_are_bounded_at_run_time(rules, when, message):
    rs = rules.load(guard_rule(when))
    msg = _limit_error(rs, x + c(10**6))
    assert msg == f"rules1.yaml:3: rule s/limited: {message}"


def test_results_and_node_args_are_bounded_at_run_time(rules):
    rs = rules.load("""
        s:
          rules:
            - name: via-const-like
              match: (MUL x k@CONST)
              rewrite: (MUL x {const_like(k, k.arg << 70)})
            - name: via-arg
              match: (SUB x k@CONST)
              rewrite: (SUB x (CONST :arg {k.arg << 70}))
    """)
    assert _limit_error(rs, x * c(5)).startswith("rules1.yaml:3: rule s/via-const-like: a result holds")
    assert _limit_error(rs, x - c(5)).startswith("rules1.yaml:6: rule s/via-arg: a result holds")


def test_results_at_the_64_bit_limits_are_fine(rules):
    rs = rules.load(guard_rule("k.arg == 1", "(ADD x {(1 << 63) - 1})"))
    assert rs.rewrite(x + c(1)) is x + c(dtypes.index.max)
    rs = rules.load(guard_rule("k.arg == 1", "(ADD x {-(1 << 63)})"))
    assert rs.rewrite(x + c(1)) is x + c(RESULT_MIN)
    # within the IR's 64 bits but not the dtype's: an index is signed
    rs = rules.load(guard_rule("k.arg == 1", "(ADD x {(1 << 64) - 1})"))
    with pytest.raises(TypeError, match=f"rule s/limited: .*{RESULT_MAX} does not fit"):
        rs.rewrite(x + c(1))


# ------------------------------------------------------------------ the bounded operators

@settings(max_examples=examples(200), deadline=None)
@given(st.integers(-2**70, 2**70), st.integers(0, 300))
def test_bounded_int_operators_agree_with_python_within_the_limit(a, b):
    for bounded, want in ((bounded_pow, a ** b), (bounded_lshift, a << b)):  # at most 21 000 bits: cheap here
        if want.bit_length() <= INT_BITS:
            assert bounded(a, b) == want
        else:
            with pytest.raises(ExprLimitError):
                bounded(a, b)
    assert bounded_mul(a, b) == a * b  # integer products grow by the operands' bits only: never refused


def test_bounded_sequence_operators_at_the_limit():
    assert len(bounded_mul((1, 2), SEQ_LIMIT // 2)) == SEQ_LIMIT
    assert bounded_mul(SEQ_LIMIT, "a") == "a" * SEQ_LIMIT
    with pytest.raises(ExprLimitError):
        bounded_mul("ab", SEQ_LIMIT // 2 + 1)
    assert len(bounded_range(-SEQ_LIMIT, 0)) == SEQ_LIMIT
    with pytest.raises(ExprLimitError, match="more than 4096 numbers"):
        bounded_range(0, 10**30)
    assert bounded_sum([[1]] * SEQ_LIMIT, []) == [1] * SEQ_LIMIT
    assert bounded_sum(range(10)) == 45
    with pytest.raises(ExprLimitError):
        bounded_sum([[1]] * (SEQ_LIMIT + 1), [])
    assert check_result((RESULT_MIN, RESULT_MAX, True, 1.5, "s")) == (RESULT_MIN, RESULT_MAX, True, 1.5, "s")
    with pytest.raises(ExprLimitError):
        check_result((1, (2, RESULT_MAX + 1)))


# ------------------------------------------------------------------ YAML aliases

def _bomb(levels: int) -> str:
    text = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    prev = "a"
    for name in "bcdefghijk"[:levels]:
        text += f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        prev = name
    return text


def test_a_yaml_alias_bomb_is_refused_quickly(rules):
    t0 = time.perf_counter()
    [d] = errors(rules, _bomb(9))
    assert time.perf_counter() - t0 < 2
    assert (d.loc.line, d.loc.col) == (2, 8)
    assert d.message == "invalid YAML: aliases expand this file by more than 10000 nodes"


def test_a_recursive_yaml_alias_is_refused(rules):
    [d] = errors(rules, "s: &s [1, *s]\n")
    assert (d.loc.line, d.loc.col, d.message) == (1, 11, "invalid YAML: an alias refers to a node that contains it")


def test_a_few_aliases_are_fine(rules):
    rs = rules.load("""
        s:
          rules:
            - name: add-zero
              match: &m (ADD x 0)
              rewrite: x
            - name: add-zero-again
              match: *m
              rewrite: x
    """)
    assert rs.rewrite(x + 0) is x


# ------------------------------------------------------------------ YAML nesting and characters

@pytest.mark.parametrize("depth", [101, 3_000, 100_000])  # 100 000 crashed libyaml's composer (a segfault)
def test_yaml_nested_too_deep_is_refused_before_composing(rules, depth):
    t0 = time.perf_counter()
    [d] = errors(rules, "s: " + "[" * depth + "]" * depth + "\n")
    assert time.perf_counter() - t0 < 5
    assert (d.loc.line, d.message) == (1, "invalid YAML: nested deeper than 100 levels")
    # at the 101st level (the root mapping is level 1); PyYAML 6.0.4's libyaml scans ahead and stops at
    # its own limit, 1000 levels, before the event stream reaches ours
    assert d.loc.col in (103, 1003)


def test_yaml_at_the_nesting_limit_is_read(rules):
    [d] = errors(rules, "s: " + "[" * 99 + "]" * 99 + "\n")
    assert d.message.startswith("rule set 's' must be a mapping")


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x7f"])
def test_a_control_character_is_a_located_error(rules, char):
    [d] = errors(rules, f"s:\n  rules:\n    - name: a{char}b\n")
    assert (d.loc.line, d.loc.col) == (3, 14)
    assert d.message.startswith(f"invalid YAML: character U+{ord(char):04X} is not allowed")


def test_the_source_excerpt_is_printable_and_bounded():
    from rulec.diagnostics import EXCERPT_WIDTH, Diagnostic, Loc

    line = "x" * 500 + "\x1b[31m" + "y" * 500
    d = Diagnostic("error", Loc("f.yaml", 1, 501), "m", 3)
    src_line, caret_line = d.render({"f.yaml": [line]}).split("\n")[1:]
    shown = src_line.split(" | ", 1)[1]
    assert shown.isprintable() and len(shown) <= EXCERPT_WIDTH + 6
    caret = caret_line.split(" | ", 1)[1]
    assert shown[caret.index("^")] == "\ufffd" and shown.startswith("...") and shown.endswith("...")
