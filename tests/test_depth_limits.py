"""No depth or size limit crashes the toolkit (issue 7, item 7), and engine errors that name their rules.

Deep graphs go through every walk (shape inference, bounds, rewrite in both orders, egglog, the
scheduler, the interpreter, the lazy evaluator, printing) under Python's default recursion limit;
deep patterns get a diagnostic; the shadowing check stays near-linear in the number of rules.
"""
from __future__ import annotations

import copy
import pickle
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

from rulec import Tensor
from rulec.cli import main as rulec_main
from rulec.compiler import compile_project
from rulec.diagnostics import Loc, Reporter
from rulec.model import Rule, RuleSetDef
from rulec.patterns import PatternParser
from rulec.runtime.ir.dtype import dtypes
from rulec.backends.kernel_text import kernel_text
from rulec.runtime.interpret.interpret import run_kernel
from rulec.runtime.interpret.lazy_eval import evaluate
from rulec.runtime.ir.ops import Ops
from rulec.runtime.engine.rewrite import RewriteError, graph_rewrite
from rulec.runtime.schedule.helpers import affine_in
from rulec.runtime.ir.uop import UOp
from rulec.sexpr import MAX_NESTING, read_sexpr
from rulec.variants import pattern_variants

x = UOp.variable("x", 0, 10)


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    # the fix is iteration, never a higher limit: every test here runs under Python's default
    assert sys.getrecursionlimit() <= 1000


# ------------------------------------------------------------------ deep graphs


def test_elementwise_chain_of_20000_ops_schedules_and_computes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a)
    for _ in range(20000):
        t = t + 1
    assert t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a + 20000)


def test_permute_reshape_chain_of_200_steps():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t, ref = Tensor(a), a
    for i in range(200):
        t = t.permute(2, 0, 1).reshape(4, 3, 2).reshape(2, 3, 4)
        ref = ref.transpose(2, 0, 1).reshape(4, 3, 2).reshape(2, 3, 4)
        if i % 50 == 0:
            t, ref = t * 2, ref * 2
    np.testing.assert_array_equal(t.numpy(), ref)


def test_lazy_evaluator_and_printing_of_a_deep_graph():
    a = np.arange(4, dtype=np.int32)
    t = Tensor(a)
    for _ in range(5000):
        t = t + 1
    np.testing.assert_array_equal(evaluate(t.uop), a + 5000)
    assert repr(t.uop).count("ADD") == 5000


def _deep_index(n: int) -> tuple[UOp, int]:
    """((x + 1) + 0) * 1 ... n levels deep, and how many 1s it adds."""
    e, added = x, 0
    for i in range(n):
        if i % 2:
            e = (e + 0) * 1
        else:
            e, added = e + 1, added + 1
    return e, added


def test_bounds_of_a_deep_expression():
    e, added = _deep_index(6000)
    assert (e.vmin, e.vmax) == (added, 10 + added)


@pytest.mark.parametrize("engine,bottom_up", [("python", False), ("python", True), ("egglog", False)])
def test_deep_expression_through_both_engines(rules, engine, bottom_up):
    rs = rules.load("""
        fold:
          rules:
            - name: add-zero
              match: (ADD x 0)
              rewrite: x
            - name: mul-one
              match: (MUL x 1)
              rewrite: x
    """)
    e, added = _deep_index(3000 if engine == "egglog" else 6000)
    out = rs.rewrite(e, engine=engine, bottom_up=bottom_up)
    expect = x
    for _ in range(added):
        expect = expect + 1
    assert out is expect


def test_interpreter_and_kernel_text_of_a_deep_kernel():
    f32 = dtypes.float32
    r = UOp.range(4, 0)
    g0, g1 = UOp(Ops.DEFINE_GLOBAL, f32.ptr(4), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(4), arg=1)
    value = UOp(Ops.LOAD, f32, (UOp(Ops.INDEX, f32, (g1, r)),))
    for _ in range(5000):
        value = value + UOp.const(f32, 1.0)
    ast = UOp.sink(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, f32, (g0, r)), value, r)))
    a, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    run_kernel(ast, [out, a])
    np.testing.assert_array_equal(out, a + 5000)
    text = kernel_text(ast)
    assert text.count("+ 1.0") == 5000 and "buf0[r0] = " in text


def test_pickle_round_trip_of_a_deep_graph():
    e, _ = _deep_index(6000)
    shared = UOp.sink(e, e * 2, x)
    assert pickle.loads(pickle.dumps(shared)) is shared
    assert copy.deepcopy(e) is e


def test_affine_check_of_a_deep_index_sum():
    r = UOp.range(8, 0)
    e = r
    for k in range(1000):
        e = e + r * (k % 5)
    assert affine_in(e, r)
    assert not affine_in(e * r, r)


# ------------------------------------------------------------------ engine errors


def test_rewrite_into_a_graph_containing_the_node_names_the_rule(rules):
    rs = rules.load("""
        loop:
          rules:
            - name: wrap
              match: v@DEFINE_VAR
              rewrite: (NEG (NEG v))
            - name: unwrap
              match: (NEG (NEG v))
              rewrite: v
    """)
    with pytest.raises(RewriteError) as info:
        rs.rewrite(UOp.sink(-x))
    msg = str(info.value)
    assert "rewrite cycle" in msg and "loop/wrap at rules1.yaml:3" in msg


def test_growth_at_the_root_names_the_rule(rules):
    rs = rules.load("""
        grow:
          rules:
            - name: push
              match: (ADD a b)
              rewrite: (ADD (ADD a 0) b)
            - name: pull
              match: (ADD a 0)
              rewrite: a
    """)
    with pytest.raises(RewriteError) as info:
        rs.rewrite(UOp.sink(x + x), bottom_up=True)
    assert "keeps growing" in str(info.value) and "grow/push at rules1.yaml:3" in str(info.value)


def test_never_ready_names_the_rule(rules):
    (rules.root / "waiting.py").write_text("from rulec.runtime.engine.rewrite import RewriteNotReady\n\n\n"
                                           "def never(ctx):\n    raise RewriteNotReady\n")
    rs = rules.load("""
        stuck:
          rules:
            - name: fine
              match: (ADD a 0)
              rewrite: a
            - name: never-ready
              match: DEFINE_VAR
              call: waiting:never
    """)
    for bottom_up in (False, True):
        with pytest.raises(RewriteError) as info:
            graph_rewrite(UOp.sink(x, x + 1), rs.matcher, bottom_up=bottom_up)
        msg = str(info.value)
        assert "not-ready" in msg and "stuck/never-ready at rules1.yaml:6" in msg and "stuck/fine" not in msg


# ------------------------------------------------------------------ deep patterns


def _nest(n: int, leaf: str = "x") -> str:
    return "(NEG " * n + leaf + ")" * n


def test_pattern_nested_too_deep_is_a_diagnostic_and_other_files_are_checked(rules, capsys):
    rules.write(f"""
        deep:
          rules:
            - name: deep-match
              match: {_nest(500)}
              rewrite: x
            - name: deep-result
              match: (NEG x)
              rewrite: {_nest(500)}
    """, name="a_deep.yaml")
    rules.write("""
        other:
          rules:
            - name: typo
              match: (ADDD x 0)
              rewrite: x
    """, name="b_other.yaml")
    assert rulec_main(["check", str(rules.root)]) == 1
    err = capsys.readouterr().err
    limit = f"error: pattern nested too deep (limit {MAX_NESTING})"
    assert f"a_deep.yaml:4:{14 + 5 * MAX_NESTING}: {limit}" in err  # at the first '(' too many
    assert f"a_deep.yaml:8:{16 + 5 * MAX_NESTING}: {limit}" in err
    assert "b_other.yaml:4:15: error: unknown op or group 'ADDD'" in err
    assert "Traceback" not in err and "RecursionError" not in err


def test_pattern_at_the_nesting_limit_builds_and_runs(rules):
    read_sexpr(_nest(MAX_NESTING))
    rs = rules.load(f"""
        edge:
          rules:
            - name: unwrap
              match: {_nest(MAX_NESTING)}
              rewrite: x
            - name: wrap
              match: (ADD x 7)
              rewrite: {_nest(MAX_NESTING)}
    """)
    e = x
    for _ in range(MAX_NESTING):
        e = -e
    for engine in ("python", "egglog"):
        assert rs.rewrite(e, engine=engine) is x
        assert rs.rewrite(x + 7, engine=engine) is x


# ------------------------------------------------------------------ many rules


def _many_rules(n: int) -> str:
    ops = ["ADD", "MUL", "SUB", "MAX", "IDIV", "MOD", "XOR", "AND", "OR"]
    lines = ["big:", "  rules:"]
    for i in range(n):
        a, b = ops[i % len(ops)], ops[(i // len(ops)) % len(ops)]
        m, r = [(f"({a} x {i})", "x"), (f"({a} ({b} x {i}) y)", f"({a} x y)"),
                (f"({a} x ({b} y {i}))", f"({b} x y)")][i % 3]
        lines += [f"    - name: r{i}", f"      match: {m}", f"      rewrite: {r}"]
    # two shadowed rules at the end, so the check has something to find
    lines += ["    - name: again", "      match: (ADD x 9)", "      rewrite: x",
              "    - name: sub-any", "      match: (SUB x y)", "      rewrite: x",
              "    - name: sub-const", "      match: (SUB x 7)", "      rewrite: x"]
    return "\n".join(lines) + "\n"


def test_shadowing_check_is_near_linear_in_rules(tmp_path, monkeypatch):
    from rulec import shadowing

    calls = 0
    subsumes = shadowing.subsumes

    def counting(a, b):
        nonlocal calls
        calls += 1
        return subsumes(a, b)

    monkeypatch.setattr(shadowing, "subsumes", counting)
    path = tmp_path / "many.yaml"
    path.write_text(_many_rules(3000))
    t0 = time.perf_counter()
    project = compile_project([path])
    seconds = time.perf_counter() - t0
    shadowed = sorted(d.message.split("'")[1] for d in project.warnings if "can never fire" in d.message)
    assert shadowed == ["again", "sub-const"]
    assert calls < 3 * 3003  # pairs of rules would be millions
    assert seconds < 60  # all-pairs took minutes; this is minutes of slack for a loaded machine


def test_long_include_chain_is_checked(tmp_path):
    lines = []
    for i in range(600):
        lines += [f"s{i}:"] + ([f"  include: [s{i - 1}]"] if i else [])
        lines += ["  rules:", f"    - name: r{i}", f"      match: (ADD x {i})", "      rewrite: x"]
    lines += ["s0-again:", "  include: [s599]", "  rules:", "    - name: again", "      match: (ADD x 5)",
              "      rewrite: x"]
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    project = compile_project([path])
    assert len(project.rules_of("s599")) == 600 and project.rules_of("s599")[0].name == "r0"
    assert [d.message.split("'")[1] for d in project.warnings] == ["again"]


_ATOMS = ["_", "x", "y", "z", "0", "1", "2", "CONST", "ADD", "y@CONST"]
_OPS = ["ADD", "MUL", "SUB", "ADD|MUL", "MAX"]


def _pattern_text():
    return st.recursive(
        st.sampled_from(_ATOMS),
        lambda kids: st.builds(lambda op, srcs, rest: f"({op} {' '.join(srcs)}{' ...' if rest else ''})",
                               st.sampled_from(_OPS), st.lists(kids, min_size=1, max_size=3), st.booleans()),
        max_leaves=6)


def _all_pairs_first_shadower(rules: list[Rule], j: int) -> Rule | None:
    """The check as it was: every earlier rule, every variant (the oracle of the index)."""
    from rulec.shadowing import subsumes

    for earlier in rules[:j]:
        names = [q.name for q in earlier.match.walk() if q.name]
        if earlier.when is not None or len(names) != len(set(names)):
            continue
        if any(subsumes(v, rules[j].match) for v in pattern_variants(earlier.match)):
            return earlier
    return None


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(_pattern_text(), st.booleans()), min_size=2, max_size=12))
def test_shadowing_index_agrees_with_all_pairs(specs):
    from rulec.shadowing import check_shadowing

    rules = []
    for i, (text, guarded) in enumerate(specs):
        loc = Loc("r.yaml", i + 1, 1)
        pat = PatternParser(lambda off, tok, loc=loc: loc).pattern(read_sexpr(text))
        rule = Rule(f"r{i}", loc, pat, ruleset="s", file="r.yaml")
        rule.when = object() if guarded else None  # only `is None` matters to the check
        rules.append(rule)
    rs = RuleSetDef("s", Loc("r.yaml", 1, 1), "r.yaml", rules=rules)
    rep = Reporter()
    check_shadowing(rs, {"s": rs}, rep)
    got = {d.message.split("'")[1]: d.message.split("'")[3] for d in rep.diagnostics}
    want = {}
    for j, rule in enumerate(rules):
        earlier = _all_pairs_first_shadower(rules, j)
        if earlier is not None:
            want[rule.name] = earlier.name
    assert got == want
