"""Random integer index expressions, and a reference evaluator, for property tests and benchmarks.

Strategies (hypothesis):
  int_exprs()        UOps of dtype index over a few bounded variables and RANGEs, with ADD SUB MUL
                     IDIV MOD MAX NEG and WHERE, constants including 0, 1 and negatives
  conditions(ints)   CMPLT / CMPNE / CMPEQ of two expressions drawn from `ints` (dtype bool)
  envs(expr)         a value for every variable and range of `expr`, within its bounds

Functions:
  evaluate(uop, env) the value of `uop` with C semantics (IDIV and MOD truncate toward zero);
                     raises DivisionByZero, or another Undefined, where C leaves the value undefined
  evaluate_all(uop, env)  the same for every node below `uop`, as a dict
  leaves(uop)        the DEFINE_VAR and RANGE nodes `uop` reads, the keys an env needs
  node_count(uop)    the number of distinct nodes: len(uop.toposort())
  tree_size(uop)     the number of nodes of `uop` written out as a tree (a shared node once per use)
  shared_nodes(uop)  the ALU nodes used more than once: where node_count and tree_size part ways

Typical use:

    @given(expr=int_exprs(), data=st.data())
    def test_something(expr, data):
        env = data.draw(envs(expr))
        try:
            want = evaluate(expr, env)
        except Undefined:
            assume(False)
"""
from __future__ import annotations

from typing import Mapping

from hypothesis import assume
from hypothesis import strategies as st

from rulec.runtime.ir.bounds import c_div, c_mod
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp

__all__ = [
    "VARIABLES", "RANGES", "CONSTANTS", "Undefined", "DivisionByZero", "Overflow",
    "consts", "int_exprs", "conditions", "envs", "evaluate", "evaluate_all", "leaves", "node_count", "tree_size", "shared_nodes",
]

# The default leaves: variables with negative, non-negative and strictly positive ranges, and loops of
# several extents (an extent-1 loop is always 0, which the bounds analysis knows).
VARIABLES: tuple[UOp, ...] = (
    UOp.variable("a", -8, 8),
    UOp.variable("b", 0, 15),
    UOp.variable("n", 1, 64),
)
RANGES: tuple[UOp, ...] = (UOp.range(4, 0), UOp.range(16, 1), UOp.range(1, 2))
# Constants worth hitting often: identities, small divisors, powers of two, negatives.
CONSTANTS: tuple[int, ...] = (0, 1, -1, 2, -2, 3, 4, 8, 16, -16)

BINARY = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX)
DIVISION = (Ops.IDIV, Ops.MOD)
COMPARISONS = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)


# ------------------------------------------------------------------ strategies

def consts(values: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[UOp]:
    """Index CONSTs: the CONSTANTS, or any small integer."""
    values = values if values is not None else st.one_of(st.sampled_from(CONSTANTS), st.integers(-40, 40))
    return values.map(lambda v: UOp.const(dtypes.index, v))


def _nonzero_consts() -> st.SearchStrategy[UOp]:
    return consts(st.one_of(st.sampled_from([c for c in CONSTANTS if c]), st.integers(-20, 20).filter(bool)))


def conditions(ints: st.SearchStrategy[UOp]) -> st.SearchStrategy[UOp]:
    """A comparison of two expressions from `ints`: a bool UOp."""
    return st.builds(lambda op, a, b: a.alu(op, b), st.sampled_from(COMPARISONS), ints, ints)


def _idioms(e: st.SearchStrategy[UOp]) -> st.SearchStrategy[UOp]:
    # Shapes that index arithmetic is full of and that random trees almost never contain: a value
    # split by a divisor and put back together, with the same constant in several places.
    c = _nonzero_consts()
    return st.one_of(
        st.builds(lambda x, y, k: (x * k + y) // k, e, e, c),
        st.builds(lambda x, y, k: (x * k + y) % k, e, e, c),
        st.builds(lambda x, k: (x // k) * k + x % k, e, c),
        st.builds(lambda x, k, j: (x + k) + j, e, c, c),
        st.builds(lambda x, k: (x * k) // k, e, c),
        st.builds(lambda x, y, k, j: (x * k + y * j) < (k * j), e, e, c, c).map(lambda b: b.where(1, 0)),
    )


def int_exprs(variables: tuple[UOp, ...] = VARIABLES, ranges: tuple[UOp, ...] = RANGES,
              max_leaves: int = 12, idioms: bool = True) -> st.SearchStrategy[UOp]:
    """Random index expressions over `variables` and `ranges`.

    Divisors are mostly non-zero constants, so that few samples divide by zero. With `idioms`,
    some subexpressions have the shapes index arithmetic produces, e.g. (x*k + y) // k.
    """
    symbols = st.sampled_from(tuple(variables) + tuple(ranges))
    # two in three leaves are symbols: trees of constants only fold away and test little
    leaf = st.one_of(symbols, symbols, consts())

    def extend(e: st.SearchStrategy[UOp]) -> st.SearchStrategy[UOp]:
        parts = [
            st.builds(lambda op, a, b: a.alu(op, b), st.sampled_from(BINARY), e, e),
            st.builds(lambda op, a, b: a.alu(op, b), st.sampled_from(DIVISION), e, st.one_of(_nonzero_consts(), e)),
            e.map(lambda a: -a),
            st.builds(lambda c, a, b: c.where(a, b), conditions(e), e, e),
        ]
        if idioms:
            parts.append(_idioms(e))
        return st.one_of(*parts)

    return st.recursive(leaf, extend, max_leaves=max_leaves)


def leaves(uop: UOp) -> tuple[UOp, ...]:
    """The DEFINE_VAR and RANGE nodes below `uop`, in toposort order."""
    return tuple(u for u in uop.toposort() if u.op in (Ops.DEFINE_VAR, Ops.RANGE))


def envs(uop: UOp) -> st.SearchStrategy[dict[UOp, int]]:
    """An assignment of every variable and range of `uop` to a value within its bounds."""
    return st.fixed_dictionaries({v: st.integers(v.vmin, v.vmax) for v in leaves(uop)})


# ------------------------------------------------------------------ evaluation

class Undefined(ArithmeticError):
    """The expression has no value for this assignment: C leaves it undefined."""


class DivisionByZero(Undefined):
    """IDIV or MOD by zero."""


class Overflow(Undefined):
    """A signed fixed-width result out of its dtype's range, or a shift C does not define."""


def _fit(value, dtype):
    """The value as a node of `dtype` holds it: index is exact, signed overflow is undefined, unsigned wraps."""
    kind = dtype.kind
    if kind in ("bool", "index"):
        return value
    if kind == "uint":
        return value % (dtype.max + 1)
    if kind == "int" and not dtype.min <= value <= dtype.max:
        raise Overflow(f"{value} does not fit {dtype}")
    return value


def _shift(op: Ops, a: int, b: int, dtype) -> int:
    width = 8 * dtype.itemsize
    if not 0 <= b < width or a < 0:
        raise Overflow(f"{op.name} of {a} by {b} is undefined")
    return a << b if op is Ops.SHL else a >> b


_BINARY = {
    Ops.ADD: lambda a, b: a + b,
    Ops.SUB: lambda a, b: a - b,
    Ops.MUL: lambda a, b: a * b,
    Ops.MAX: max,
    Ops.AND: lambda a, b: a & b,
    Ops.OR: lambda a, b: a | b,
    Ops.XOR: lambda a, b: a ^ b,
    Ops.CMPLT: lambda a, b: a < b,
    Ops.CMPNE: lambda a, b: a != b,
    Ops.CMPEQ: lambda a, b: a == b,
}


def _eval_node(u: UOp, args: list, env: Mapping[UOp, int]):
    op = u.op
    if op is Ops.CONST:
        return u.arg
    if op in (Ops.DEFINE_VAR, Ops.RANGE):
        try:
            return env[u]
        except KeyError:
            raise KeyError(f"no value for {u} in the environment") from None
    if op in _BINARY:
        return _fit(_BINARY[op](*args), u.dtype)
    if op in (Ops.IDIV, Ops.MOD):
        a, b = args
        if b == 0:
            raise DivisionByZero(f"{op.name} of {a} by zero")
        return _fit(c_div(a, b) if op is Ops.IDIV else c_mod(a, b), u.dtype)
    if op is Ops.NEG:
        return _fit(-args[0], u.dtype)
    if op in (Ops.SHL, Ops.SHR):
        return _fit(_shift(op, args[0], args[1], u.dtype), u.dtype)
    if op is Ops.WHERE:
        return args[1] if args[0] else args[2]
    raise NotImplementedError(f"evaluate: {op.name} is not an integer arithmetic op")


def evaluate_all(uop: UOp, env: Mapping[UOp, int]) -> dict[UOp, int | bool]:
    """The value of every node below `uop` (as evaluate), keyed by node."""
    vals: dict[UOp, int | bool] = {}
    for u in uop.toposort():
        vals[u] = _eval_node(u, [vals[s] for s in u.src], env)
    return vals


def evaluate(uop: UOp, env: Mapping[UOp, int]) -> int | bool:
    """The value of `uop` when each DEFINE_VAR and RANGE node takes its value in `env`.

    C semantics: IDIV and MOD truncate toward zero. Every node is evaluated, as a GPU `select` does,
    so a division by zero in the branch a WHERE does not pick still makes the value undefined. Index
    arithmetic is exact; fixed-width signed overflow raises Overflow and unsigned arithmetic wraps.
    """
    return evaluate_all(uop, env)[uop]


# ------------------------------------------------------------------ measures

def node_count(uop: UOp) -> int:
    """Distinct nodes: the size of the hash-consed DAG."""
    return len(uop.toposort())


def tree_size(uop: UOp) -> int:
    """Nodes of the expression written out as a tree: a shared node counts once per use."""
    size: dict[UOp, int] = {}
    for u in uop.toposort():
        size[u] = 1 + sum(size[s] for s in u.src)
    return size[uop]


def shared_nodes(uop: UOp) -> tuple[UOp, ...]:
    """ALU nodes of `uop` with more than one use (several users, or one user twice), in toposort order.

    Variables, ranges and constants are leaves and never count: sharing them is free.
    """
    uses: dict[UOp, int] = {}
    for u in uop.toposort():
        for s in u.src:
            uses[s] = uses.get(s, 0) + 1
    return tuple(u for u, n in uses.items() if n > 1 and u.op in GroupOp.ALU)


def check_same_value(before: UOp, after: UOp, data) -> None:
    """`after` has `before`'s dtype and value at up to 4 drawn environments (at least one where `before` is
    defined): rules never change a value nor introduce undefined behaviour."""
    assert after.dtype == before.dtype
    checked = 0
    for _ in range(4):
        env = data.draw(envs(before), label="env")
        try:
            want = evaluate(before, env)
        except Undefined:
            continue
        got = evaluate(after, env)  # must not raise: rules never introduce undefined behaviour
        assert got == want and type(got) is type(want), f"{before}\n  -> {after}\n  at {env}: {want} != {got}"
        checked += 1
    assume(checked > 0)
