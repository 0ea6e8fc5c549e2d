"""The bounds table (runtime/bounds_table.py) is the one source of vmin/vmax: the Python analysis is compiled
from it, the egglog analysis is rendered from it, and the bounds it gives are sound."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from rulec.egglog_prelude import analysis_text, bounds_case
from rulec.runtime import bounds as B
from rulec.runtime.bounds_table import BOUNDS, Case
from rulec.runtime.dtype import dtypes
from rulec.runtime.egraph import CORE_OPS
from rulec.runtime.ops import Ops
from rulec.runtime.uop import UOp

BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR]
COMPARE = [Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]


def concrete(u: UOp, env: dict[str, int]) -> int:
    """The value of an integer/bool expression under C semantics, for given variable values."""
    if u.op is Ops.CONST:
        return int(u.arg)
    if u.op is Ops.DEFINE_VAR:
        return env[u.arg[0]]
    v = [concrete(s, env) for s in u.src]
    if u.op is Ops.NEG:
        return -v[0]
    if u.op is Ops.CAST:
        return int(bool(v[0])) if u.dtype == dtypes.bool else v[0]
    if u.op is Ops.WHERE:
        return v[1] if v[0] else v[2]
    a, b = v
    if u.dtype == dtypes.bool and u.op in (Ops.AND, Ops.OR, Ops.XOR):
        a, b = bool(a), bool(b)
    return {Ops.ADD: lambda: a + b, Ops.SUB: lambda: a - b, Ops.MUL: lambda: a * b,
            Ops.IDIV: lambda: B.c_div(a, b), Ops.MOD: lambda: B.c_mod(a, b), Ops.MAX: lambda: max(a, b),
            Ops.AND: lambda: a & b, Ops.OR: lambda: a | b, Ops.XOR: lambda: a ^ b,
            Ops.CMPLT: lambda: int(a < b), Ops.CMPNE: lambda: int(a != b), Ops.CMPEQ: lambda: int(a == b)}[u.op]()


@st.composite
def expressions(draw, depth: int = 3):
    """Small index expressions over two variables; divisors never span zero (the value would be undefined)."""
    x = UOp.variable("x", draw(st.integers(-4, 0)), draw(st.integers(0, 5)))
    y = UOp.variable("y", draw(st.integers(-3, 3)), draw(st.integers(3, 6)))

    def build(d: int) -> UOp:
        if d == 0 or draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from([x, y, UOp.const(dtypes.index, draw(st.integers(-5, 7)))]))
        kind = draw(st.sampled_from(["binary", "binary", "compare", "logic", "neg"]))
        a, b = build(d - 1), build(d - 1)
        if kind == "neg":
            return -a
        if kind == "compare":  # a bool node, used as a condition: every node stays well typed
            return a.alu(draw(st.sampled_from(COMPARE)), b).where(a, b)
        if kind == "logic":
            c1, c2 = a.alu(draw(st.sampled_from(COMPARE)), b), b.alu(Ops.CMPLT, a + 1)
            return c1.alu(draw(st.sampled_from([Ops.AND, Ops.OR, Ops.XOR])), c2).where(a, -b)
        op = draw(st.sampled_from(BINARY))
        if op in (Ops.IDIV, Ops.MOD):
            b = UOp.const(dtypes.index, draw(st.sampled_from([-3, -2, 1, 2, 3, 5])))
        return a.alu(op, b)

    return build(depth), x, y


@settings(max_examples=examples(300), deadline=None)
@given(expressions())
def test_bounds_hold_for_every_value_of_the_variables(drawn):
    root, x, y = drawn
    nodes = root.toposort()
    for vx, vy in itertools.product(range(x.arg[1], x.arg[2] + 1), range(y.arg[1], y.arg[2] + 1)):
        env = {"x": vx, "y": vy}
        for u in nodes:
            if u.op in (Ops.IDIV, Ops.MOD) and concrete(u.src[1], env) == 0:
                continue
            v = concrete(u, env)
            assert u.vmin <= v <= u.vmax, f"{u.op.name}: {v} outside [{u.vmin}, {u.vmax}] at {env}"


@pytest.mark.parametrize("expr,lo,hi", [
    (lambda x: x + 3, 3, 13), (lambda x: x * -2, -20, 0), (lambda x: x // 3, 0, 3), (lambda x: x % 4, 0, 3),
    (lambda x: (x - 5) % 4, -3, 3), (lambda x: x & 6, 0, 6), (lambda x: x | 4, 0, 15), (lambda x: x ^ 0, 0, 15),
    (lambda x: x < 11, True, True), (lambda x: x < 0, False, False), (lambda x: x.ne(x + 20), True, True),
])
def test_tight_bounds_of_the_table(expr, lo, hi):
    u = expr(UOp.variable("x", 0, 10))
    assert (u.vmin, u.vmax) == (lo, hi)
    assert type(u.vmin) is type(lo)  # a bool node's bounds are bools


def test_an_overflowing_sum_keeps_the_dtype_limits():
    x = UOp.variable("x", 0, 2**31 - 1, dtypes.int32)
    assert ((x + x).vmin, (x + x).vmax) == (dtypes.int32.min, dtypes.int32.max)


def test_every_case_is_rendered_as_one_egglog_analysis_rule():
    text = analysis_text([Ops[n] for n in CORE_OPS])
    for op, cases in BOUNDS.items():
        for case in cases:
            assert text.count(f':name "iv-{case.name}"') == 1, case.name
    query, action = bounds_case("OR", BOUNDS["OR"][1])
    assert "(pow2m1 " in query and action.startswith("(set (vmin e) 0)")
    query, action = bounds_case("ADD", BOUNDS["ADD"][0])
    assert "(>= t1 dl)" in query and "(<= t2 dh)" in query  # clipped to the dtype: overflow keeps the limits


def test_the_table_refuses_what_a_rendering_cannot_express():
    with pytest.raises(ValueError, match="not allowed"):
        B._compile("ADD", (Case("bad", lo="al ** 2"),))
    with pytest.raises(ValueError, match="unknown name"):
        B._compile("ADD", (Case("bad", lo="zl"),))
    with pytest.raises(ValueError, match="no egglog form"):
        bounds_case("ADD", Case("bad", lo="mask(al)"))  # mask only as a `hi`
