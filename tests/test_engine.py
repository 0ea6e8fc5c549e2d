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


@pytest.fixture
def count_adds(rules):
    """A rule set whose one rule records (in counting_callbacks.SEEN, emptied here) every ADD it is tried on."""
    import counting_callbacks

    counting_callbacks.SEEN.clear()
    return rules.load("""
        count:
          rules:
            - name: count-adds
              match: a@(ADD _ _)
              call: counting_callbacks:count
        callbacks: [counting_callbacks]
    """)


def test_shared_nodes_are_rewritten_once(count_adds):
    import counting_callbacks

    rs = count_adds
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


# ------------------------------------------------------------------ the fast path (one function per root op)

def _rewrites(rs, node, traced: bool):
    """rs.matcher on `node`, on the untraced fast path or the traced per-rule path: the result and the rules that
    fired, in order."""
    from rulec.runtime.engine.trace import tracing

    if not traced:
        seen = []
        import rulec.runtime.engine.rewrite as rw

        class Spy(rw._Rewriter):
            def _count(self, n, r, rid):
                seen.append(self.matcher.rules[rid].name)
                super()._count(n, r, rid)
        return Spy(rs.matcher, None, False, None).run(node), seen
    with tracing() as t:
        out = graph_rewrite(node, rs.matcher)
    return out, [e.rule.name for e in t.events]


def test_fast_and_traced_paths_fire_the_same_rules_in_the_same_order():
    from rulec.runtime.engine.artifacts import shipped_ruleset

    rs = shipped_ruleset("symbolic")
    z = UOp.variable("z", -5, 5)
    graphs = [((x * 4 + y * 4) // 4) % 3, (x + 0) * 1 - (y - y), UOp.sink((z * -1) + 3 < 2, (x + 3) + 4 - x),
              (x // 2 * 2 + x % 2) + (-(z) + z), ((x * 6) // 3 < 7).where(x + 1, y)]
    for g in graphs:
        fast, fired = _rewrites(rs, g, traced=False)
        traced, fired_traced = _rewrites(rs, g, traced=True)
        assert fast is traced and fired == fired_traced and fired, g


def test_an_error_on_the_fast_path_names_its_rule_as_the_traced_path_does(rules):
    from rulec.runtime.engine.matcher import RuleError
    from rulec.runtime.engine.trace import tracing

    rs = rules.load("""
        s:
          rules:
            - name: fine
              match: (MUL x 2)
              rewrite: (ADD x x)
            - name: to-shift
              match: (MUL x c@CONST :dtype index)
              when: c.arg > 1
              rewrite: (SHL x {log2(c.arg)})
    """)
    with pytest.raises(RuleError, match=r"rules1.yaml:6: rule s/to-shift: ValueError: log2") as fast:
        rs.rewrite(x * 6)
    with tracing(), pytest.raises(RuleError) as traced:
        rs.rewrite(x * 6)
    assert str(fast.value) == str(traced.value) and isinstance(fast.value, ValueError)
    assert rs.rewrite(x * 2) is x + x


@pytest.mark.parametrize("traced", [False, True])
def test_never_ready_names_the_rule_on_both_paths(rules, traced):
    from rulec.runtime.engine.trace import tracing

    rs = rules.load("""
        stuck:
          rules:
            - name: other
              match: (ADD x 0)
              rewrite: x
            - name: never
              match: DEFINE_VAR
              call: counting_callbacks:never_ready
        callbacks: [counting_callbacks]
    """)
    with pytest.raises(RewriteError, match=r"stuck/never at .*rules1.yaml:6"):
        if traced:
            with tracing():
                graph_rewrite(UOp.sink(x), rs.matcher, bottom_up=True)
        else:
            graph_rewrite(UOp.sink(x), rs.matcher, bottom_up=True)


def test_composed_matchers_keep_rule_order_and_their_op_functions(rules):
    from rulec.runtime.engine.matcher import Matcher
    from rulec.runtime.ir.ops import Ops

    first = rules.load("""
        a:
          rules:
            - name: add-zero
              match: (ADD x 0)
              rewrite: x
    """)
    second = rules.load("""
        b:
          rules:
            - name: add-zero-to-neg
              match: (ADD x 0)
              rewrite: (NEG x)
            - name: add-one
              match: (ADD x 1)
              rewrite: (SUB x -1)
    """)
    both = first.matcher + second.matcher
    renamed = Matcher("both", both.rules, both.entries)  # as the loader names a composed set
    for m in (both, renamed):
        assert [fn.__name__ for _, fn in m.fast[Ops.ADD]] == ["op_ADD", "op_ADD"]
        assert [shift for shift, _ in m.fast[Ops.ADD]] == [0, 1]
        assert graph_rewrite(x + 0, m) is x  # the first part's rule wins
        out, fired = _rewrites(type("R", (), {"matcher": m})(), x + 1, traced=False)
        assert out is x - c(-1) and fired == ["add-one"]  # the rule index is shifted past the first part
    swapped = second.matcher + first.matcher
    assert graph_rewrite(x + 0, swapped) is -x


def test_a_matcher_from_entries_alone_runs_them_in_order():
    from rulec.runtime.engine.matcher import Matcher, RuleInfo
    from rulec.runtime.ir.ops import Ops

    calls = []

    def declines(n, ctx):
        calls.append(("declines", n.op))
        return n  # the node itself: no rewrite, the next rule runs

    def negates(n, ctx):
        calls.append(("negates", n.op))
        return -n.src[0] if n.op is Ops.ADD else None

    infos = [RuleInfo("declines", "hand", "hand.yaml", 1), RuleInfo("negates", "hand", "hand.yaml", 2)]
    m = Matcher("hand", infos, [(frozenset({Ops.ADD}), 0, declines), (None, 1, negates)])
    assert graph_rewrite(x + y, m) is -x
    assert [name for name, op in calls if op is Ops.ADD] == ["declines", "negates"]
    assert ("negates", Ops.DEFINE_VAR) in calls  # the wildcard root runs on every op


@pytest.mark.parametrize("bottom_up", [False, True])
def test_subgraphs_no_rule_is_rooted_in_are_taken_whole(count_adds, bottom_up):
    import counting_callbacks

    rs = count_adds
    muls = x * y
    for i in range(50):  # no ADD at or below: nothing can fire there
        muls = muls * (i + 2)
    inner_add = x + y
    root = UOp.sink(muls, inner_add * 3)
    from rulec.runtime.engine.rewrite import _Rewriter

    rw = _Rewriter(rs.matcher, None, bottom_up, None)
    assert rw.run(root) is root
    assert counting_callbacks.SEEN == [inner_add]  # the ADD below a MUL is still reached
    assert muls in rw.replace and muls.src[0] not in rw.replace  # the MUL chain was not walked
    # graph_rewrite_map still maps every node
    m = graph_rewrite_map(root, rs.matcher, bottom_up=bottom_up)
    assert all(m[u] is u for u in root.toposort())
