"""The Python rewrite engine: fixed points, memoization, traversal order, not-ready, non-termination."""
from __future__ import annotations

import pytest

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.rewrite import RewriteError, graph_rewrite, graph_rewrite_map
from rulec.runtime.ir.uop import substitute
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)
y = UOp.variable("y", 0, 10)


def c(v):
    return UOp.const(dtypes.index, v)


def test_fixed_point_reaches_through_new_nodes(rules):
    rs = rules.load("""
        fold:
          rules:
            - name: add-zero
              match: (ADD x 0)
              rewrite: x
            - name: mul-zero
              match: (MUL _ 0)
              rewrite: 0
    """)
    # (x*0) becomes 0, which makes the ADD above it an add-zero
    assert rs.rewrite((y * 0) + x) is x
    assert rs.rewrite(((y * 0) + x) * 1 + ((x * 0) + 0)) is x * 1


def test_shared_nodes_are_rewritten_once(rules):
    rs = rules.load("""
        count:
          rules:
            - name: count-adds
              match: a@(ADD _ _)
              call: counting_callbacks:count
        callbacks: [counting_callbacks]
    """)
    import counting_callbacks

    counting_callbacks.SEEN.clear()
    shared = x + y
    graph_rewrite(UOp.sink(shared * 2, shared * 3, shared), rs.matcher)
    assert counting_callbacks.SEEN == [shared]


def test_graph_rewrite_map_and_substitute(rules):
    rs = rules.load("""
        fold:
          rules:
            - name: add-zero
              match: (ADD x 0)
              rewrite: x
    """)
    e = (x + 0) * y
    m = graph_rewrite_map(e, rs.matcher)
    assert m[e] is x * y and m[x + 0] is x and m[y] is y
    assert substitute(e, {y: x}) is (x + 0) * x


def test_bottom_up_rewrites_sink_side_first(rules):
    # (NEG (NEG x)) -> x: sink-first sees the outer NEG before its source is rewritten
    rs = rules.load("""
        negs:
          rules:
            - name: double-neg
              match: (NEG (NEG x))
              rewrite: x
    """)
    e = -(-(-(-x)))
    assert rs.rewrite(e) is x
    assert rs.rewrite(e, bottom_up=True) is x
    assert rs.rewrite(-e, bottom_up=True) is -x


def test_not_ready_is_revisited_after_the_rest(rules):
    rs = rules.load("""
        gate:
          rules:
            - name: wait-for-all
              match: v@DEFINE_VAR
              call: counting_callbacks:wait_until_two
        callbacks: [counting_callbacks]
    """)
    import counting_callbacks

    counting_callbacks.SEEN.clear()
    a, b = UOp.variable("a", 0, 1), UOp.variable("b", 0, 1)
    out = graph_rewrite(UOp.sink(a, b), rs.matcher, ctx={}, bottom_up=True)
    # both variables were seen before either was rewritten
    assert out is UOp.sink(c(0), c(0))


def test_never_ready_is_an_error(rules):
    rs = rules.load("""
        stuck:
          rules:
            - name: never
              match: DEFINE_VAR
              call: counting_callbacks:never_ready
        callbacks: [counting_callbacks]
    """)
    with pytest.raises(RewriteError, match="not-ready"):
        graph_rewrite(UOp.sink(x), rs.matcher, bottom_up=True)


@pytest.mark.parametrize("bottom_up", [False, True])
def test_cycle_names_rules_and_locations(rules, bottom_up):
    rs = rules.load("""
        loop:
          rules:
            - name: swap
              match: (ADD a b)
              rewrite: (ADD b a)
    """)
    with pytest.raises(RewriteError) as info:
        rs.rewrite(x + y, bottom_up=bottom_up)
    msg = str(info.value)
    assert "loop/swap" in msg and "rules1.yaml:3" in msg


def test_growth_is_an_error(rules):
    rs = rules.load("""
        grow:
          rules:
            - name: wrap
              match: v@DEFINE_VAR
              rewrite: (ADD v 0)
            - name: unwrap
              match: (ADD v 0)
              rewrite: (ADD (ADD v 0) 0)
    """)
    with pytest.raises(RewriteError, match="grow/"):
        rs.rewrite(x)
