"""The bounds table (runtime/ir/bounds_table.py) is the one source of vmin/vmax: the Python analysis is compiled
from it, the egglog analysis is rendered from it, and the bounds it gives are sound.

Random expressions over narrow, wide, signed and unsigned dtypes (constants at the limits, casts, NEG,
WHERE, bitwise ops, comparisons) are evaluated for every value of their variables with wrap-around
semantics; both analyses must agree node by node and hold every value. A seeded sample is also checked to
make every case of the table decide a bound that some value reaches, so a case made too tight fails."""
from __future__ import annotations

import functools
import itertools
import random
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import SEARCH, examples
from rulec.egglog_prelude import analysis_text, bounds_case, prelude_text
from rulec.runtime.ir import bounds as B
from rulec.runtime.ir.alu import alu_eval
from rulec.runtime.ir.bounds_table import BOUNDS, Case, arity_of, source_names
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.engine.egglog_bindings import bindings
from rulec.runtime.engine.egraph import CORE_OPS, ctor_fields, egg_string
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR]
COMPARE = [Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]
# narrow, wide, signed and unsigned: where the dtype limits and wrap-around matter (uint64's upper limit
# does not fit egglog's i64, so it has no egglog analysis to compare with)
DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64,
          dtypes.index]


# ------------------------------------------------------------------ concrete values: C, wrapping

def wrap(v: int, dt: DType) -> int:
    """`v` as a value of `dt`: two's complement wrap-around (index is 64-bit), bool is 0 or 1."""
    if dt == dtypes.bool:
        return int(bool(v))
    bits = 8 * dt.itemsize
    v &= (1 << bits) - 1
    return v - (1 << bits) if dt.kind != "uint" and v >> (bits - 1) else v


def step(u: UOp, args: list[int], env: dict[str, int]) -> int:
    """The value of one node from its sources' values, as runtime/ir/alu.py specifies integer ops: C's
    semantics in the node's dtype, wrapping on overflow, division (and modulo) by zero giving 0."""
    if u.op is Ops.CONST:
        return int(u.arg)
    if u.op is Ops.DEFINE_VAR:
        return env[u.arg[0]]
    if u.op is Ops.WHERE:
        return args[1] if args[0] else args[2]
    if u.op in (Ops.NEG, Ops.CAST):
        return wrap(-args[0] if u.op is Ops.NEG else args[0], u.dtype)
    a, b = args
    if u.op in COMPARE:  # compares the operands as given
        return int({Ops.CMPLT: a < b, Ops.CMPNE: a != b, Ops.CMPEQ: a == b}[u.op])
    exact = {Ops.ADD: lambda: a + b, Ops.SUB: lambda: a - b, Ops.MUL: lambda: a * b,
             Ops.IDIV: lambda: B.c_div(a, b) if b else 0, Ops.MOD: lambda: B.c_mod(a, b) if b else 0,
             Ops.MAX: lambda: max(a, b), Ops.AND: lambda: a & b, Ops.OR: lambda: a | b,
             Ops.XOR: lambda: a ^ b}[u.op]()
    return wrap(exact, u.dtype)


def values(nodes: list[UOp], env: dict[str, int]) -> dict[UOp, int]:
    """The value of every node (sources first, as toposort lists them) for given variable values."""
    out: dict[UOp, int] = {}
    for u in nodes:
        out[u] = step(u, [out[s] for s in u.src], env)
    return out


def assignments(variables: list[UOp]) -> list[dict[str, int]]:
    """Every assignment of values to the variables, within their ranges."""
    ranges = [range(v.arg[1], v.arg[2] + 1) for v in variables]
    return [{v.arg[0]: n for v, n in zip(variables, ns)} for ns in itertools.product(*ranges)]


# ------------------------------------------------------------------ random expressions

class Choices(Protocol):
    def pick(self, options: Sequence[Any]) -> Any: ...
    def number(self, lo: int, hi: int) -> int: ...


class Seeded:
    """Choices from a seeded generator: the same expressions on every run."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, options: Sequence[Any]) -> Any:
        return self.rng.choice(options)

    def number(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class Drawn:
    """Choices drawn by hypothesis, which shrinks a failing expression."""

    def __init__(self, draw: Callable) -> None:
        self.draw = draw

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def number(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


def clamp(v: int, dt: DType) -> int:
    return min(max(v, dt.min), dt.max)


def random_expression(c: Choices, depth: int = 3) -> tuple[UOp, list[UOp]]:
    """An integer expression of a random dtype over two small-ranged variables: constants at the dtype
    limits, casts between dtypes (bool too), NEG, WHERE, comparisons and every binary op, divisors of any
    sign (zero included)."""
    dt = c.pick(DTYPES)
    lo = clamp(c.pick([0, -5, -12, dt.min, dt.max - 7]), dt)  # a few values: sign, mixed sign, at a limit
    x = UOp.variable("x", lo, min(lo + c.number(0, 7), dt.max), dt)
    ylo, yhi = c.pick([(0, 4), (-3, 4), (1, 4), (-4, -1)])  # a divisor of either sign, or spanning zero
    y = UOp.variable("y", clamp(ylo, dt), clamp(yhi, dt), dt)

    def leaf(d: DType) -> UOp:
        k = c.number(0, 4)
        if k < 3:
            return (x, y, x)[k].cast(d)  # x, the wider ranged, twice as often
        if d == dtypes.bool:
            return UOp.const(d, c.pick([False, True]))
        return UOp.const(d, clamp(c.pick([0, 1, 2, 3, 7, 100, -1, -2, d.min, d.min + 1, d.max, d.max - 1]), d))

    def pair(d: DType, n: int) -> tuple[UOp, UOp]:
        # now and then one operand twice: x - x, c == c and p ^ p have exact bounds (the point cases)
        a = build(d, n)
        return (a, a) if c.number(0, 4) == 0 else (a, build(d, n))

    def build(d: DType, n: int) -> UOp:
        if n == 0 or c.number(0, 3) == 0:
            return leaf(d)
        if d == dtypes.bool:  # a comparison, or two combined
            s = c.pick(DTYPES)
            cond = (p := pair(s, n - 1))[0].alu(c.pick(COMPARE), p[1])
            if c.number(0, 2) == 0:
                return cond
            other = cond if c.number(0, 3) == 0 else (p := pair(s, n - 1))[0].alu(Ops.CMPLT, p[1])
            return cond.alu(c.pick([Ops.AND, Ops.OR, Ops.XOR]), other)
        kind = c.pick(["binary", "binary", "binary", "where", "neg", "cast"])
        if kind == "where":
            return build(dtypes.bool, n - 1).where(*pair(d, n - 1))
        if kind == "neg":
            return -build(d, n - 1)
        if kind == "cast":
            return build(c.pick(DTYPES + [dtypes.bool]), n - 1).cast(d)
        a, b = pair(d, n - 1)
        return a.alu(c.pick(BINARY + [Ops.IDIV, Ops.MOD]), b)  # twice as often: they have the most cases

    return build(dt, depth), [x, y]


@st.composite
def expressions(draw, depth: int = 3):
    root, (x, y) = random_expression(Drawn(draw), depth)
    return root, x, y


# ------------------------------------------------------------------ the egglog analysis, by itself

@functools.cache
def _analysis_program() -> str:
    ops = [Ops[n] for n in CORE_OPS]
    return prelude_text(ops) + analysis_text(ops)


def egglog_bounds(nodes: list[UOp]) -> dict[UOp, tuple[int, int]]:
    """(vmin, vmax) of every node by the egglog `analysis` ruleset alone (no bounds seeded from Python).

    The nodes go in as the engine loads a graph: tab-separated `input` files of the prelude's relations
    (`In_ADD id dtype src-ids`); a top-level command per node would cost time that grows with the e-graph."""
    ids = {u: i for i, u in enumerate(nodes)}
    rows: dict[str, list[str]] = {}
    for i, u in enumerate(nodes):
        arg = (int(u.arg),) if u.op is Ops.CONST else (u.arg or ())
        # dtype, sources, arg, then an arg reference (where the arg is not one of the fields) and a tag, both 0
        extra = len(ctor_fields(u.op)) - (1 + len(u.src) + len(arg))
        assert extra in (1, 2), u.op
        fields = [i, u.dtype.name, *(ids[s] for s in u.src), *arg, *([0] * extra)]
        rows.setdefault(f"In_{u.op.name}", []).append("\t".join(map(str, fields)) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        program = []
        for rel, lines in rows.items():
            path = Path(tmp) / f"{rel}.tsv"
            path.write_text("".join(lines))
            program.append(f"(input {rel} {egg_string(str(path))})")
        program += [
            "(ruleset read) (relation Bounds (i64 i64 i64))",
            "(rule ((= lo (vmin (Ref i))) (= hi (vmax (Ref i)))) ((Bounds i lo hi)) :ruleset read)",
            "(run-schedule (saturate (run load)) (saturate (run analysis)) (saturate (run read)))",
            f"(print-function Bounds {len(nodes) + 1})"]
        eg = bindings().EGraph()
        out = str(eg.run_program(*eg.parse_program(_analysis_program() + "\n".join(program)))[-1])
    found = [tuple(map(int, r)) for r in re.findall(r"^\s*\(Bounds (\d+) (-?\d+) (-?\d+)\)", out, re.M)]
    bounds = {i: (lo, hi) for i, lo, hi in found}
    assert len(bounds) == len(found) == len(nodes), out[:300]  # one row per node, one per id
    return {u: bounds[i] for i, u in enumerate(nodes)}


def check_sound(nodes: list[UOp], variables: list[UOp], bounds: dict[UOp, tuple[int, int]], who: str) -> None:
    """Every node's value lies within its bounds, for every value of the variables."""
    for env in assignments(variables):
        for u, v in values(nodes, env).items():
            lo, hi = bounds[u]
            assert lo <= v <= hi, f"{who}: {u.op.name}:{u.dtype.name} = {v} outside [{lo}, {hi}] at {env}\n{u}"


@settings(max_examples=examples(200), deadline=None, derandomize=not SEARCH, database=None)
@given(expressions())
def test_bounds_hold_for_every_value_of_the_variables(drawn):
    root, x, y = drawn
    nodes = root.toposort()
    for env in assignments([x, y]):
        for u, v in values(nodes, env).items():
            assert u.vmin <= v <= u.vmax, f"{u.op.name}: {v} outside [{u.vmin}, {u.vmax}] at {env}"


SEEDS = range(4)


@functools.cache
def sample(seed: int) -> dict[UOp, tuple[int, int]]:
    """Every node of a seeded sample of expressions, with the least and greatest value it takes."""
    c, seen = Seeded(seed), {}
    for _ in range(examples(250)):
        root, variables = random_expression(c)
        for env in assignments(variables):
            for u, v in values(root.toposort(), env).items():
                lo, hi = seen.get(u, (v, v))
                seen[u] = (min(lo, v), max(hi, v))
    return seen


@pytest.mark.parametrize("seed", SEEDS)
def test_python_and_egglog_bounds_agree_and_hold(seed):
    seen = sample(seed)
    egg = egglog_bounds(list(seen))  # one egglog run for the whole sample (insertion order: sources first)
    for u, (lo, hi) in seen.items():
        python = (int(u.vmin), int(u.vmax))
        where = f"{u.op.name}:{u.dtype.name} takes [{lo}, {hi}]"
        assert python == egg[u], f"{where}: python {python}, egglog {egg[u]}\n{u}"
        assert python[0] <= lo and hi <= python[1], f"{where}, outside the bounds {python}\n{u}"


def deciding_cases(u: UOp) -> tuple[set[str], set[str]]:
    """The cases of the table whose `lo` is u's vmin, and those whose `hi` is its vmax: they apply to u
    (conditions, dtype, clipping) and give that very bound."""
    op = u.op.name
    scope: dict[str, Any] = {"min": min, "max": max, "cdiv": B.c_div, "mask": B._mask}
    for n, s in zip(source_names(op, arity_of(op)), u.src):
        scope[f"{n}l"], scope[f"{n}h"] = int(s.vmin), int(s.vmax)
    is_bool, dlo, dhi = u.dtype == dtypes.bool, int(u.dtype.min), int(u.dtype.max)
    los: set[str] = set()
    his: set[str] = set()
    for case in BOUNDS.get(op, ()):
        if case.dtype == ("int" if is_bool else "bool") or not all(eval(w, scope) for w in case.when):
            continue
        lo = eval(case.lo, scope) if case.lo is not None else dlo  # the table is ours, not user data
        hi = eval(case.hi, scope) if case.hi is not None else dhi
        if case.clip and not dlo <= lo <= hi <= dhi:
            continue
        if case.lo is not None and lo == u.vmin:
            los.add(case.name)
        if case.hi is not None and hi == u.vmax:
            his.add(case.name)
    return los, his


def test_the_sample_makes_every_case_decide_a_bound_that_is_reached():
    # so the soundness check above sees any case that gives a bound too tight by even one
    reached_lo: set[str] = set()
    reached_hi: set[str] = set()
    for seed in SEEDS:
        for u, (lo, hi) in sample(seed).items():
            los, his = deciding_cases(u)
            reached_lo |= los if lo == u.vmin else set()
            reached_hi |= his if hi == u.vmax else set()
    cases = [c for op, cs in BOUNDS.items() if op not in ("BIND", "RANGE") for c in cs]  # not generated
    missing = [f"{c.name}.lo" for c in cases if c.lo is not None and c.name not in reached_lo]
    missing += [f"{c.name}.hi" for c in cases if c.hi is not None and c.name not in reached_hi]
    assert missing == []


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.index], ids=str)
def test_the_least_value_divided_by_minus_one(dt):
    # dt.min / -1 overflows and wraps to dt.min (runtime/ir/alu.py), so the quotient's bounds must hold dt.min;
    # the corners give [dt.max - 2, dt.max + 1], which the dtype cannot hold (the IDIV cases are not clipped)
    x = UOp.variable("x", dt.min, dt.min + 3, dt)
    u = x.alu(Ops.IDIV, UOp.const(dt, -1))
    nodes = u.toposort()
    egg = egglog_bounds(nodes)
    assert (int(u.vmin), int(u.vmax)) == egg[u]
    check_sound(nodes, [x], {n: (n.vmin, n.vmax) for n in nodes}, "python")


def test_negating_a_bool_is_not():
    """runtime/ir/alu.py: NEG of a bool is NOT, so -False is True; the table's NEG case is for ints only."""
    u = -UOp.const(dtypes.bool, False)
    want = int(alu_eval(Ops.NEG, dtypes.bool, False))
    assert u.vmin <= want <= u.vmax
    lo, hi = egglog_bounds(u.toposort())[u]
    assert lo <= want <= hi


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
