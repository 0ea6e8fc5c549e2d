"""The egglog form of every helper that has one: the one table the egglog back end (emit_egglog.py) reads.

A helper's form is one of:
- `Prim`: an i64 primitive of egglog over integer arguments, computed here when all are constants;
- `Macro`: an expression of the guard language over the helper's parameters, parsed and resolved by the
  front end (exprs.py) like a rule's own, and translated in its place;
- `Special`: a form that reads what the pattern fixes (an op, a dtype) or builds a node; emit_egglog
  implements each, in the method named by `method`: any()/all() of a comprehension over a source list
  become relations defined by rules, and helpers of finitely many inputs (an op, a scalar dtype) become
  tables computed at build time by calling the helper itself.
A helper absent here has no egglog form: a rule that calls it is skipped, naming it.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Callable

from rulec.runtime.engine.helpers import FOLDED_OPS
from rulec.runtime.ir.bounds import c_div, c_mod
from rulec.runtime.ir.ops import Ops

from .diagnostics import Loc
from .exprs import HELPERS, bind_names, parse_expr, ref


@dataclass(frozen=True)
class Prim:
    """`(egg a b ...)` on i64 values (`egg` None: the integer itself); `fold` computes it on constants
    (None: not folded, the primitive then runs, and fails the match, in egglog)."""

    egg: str | None
    nargs: int  # the number of arguments; with `variadic`, the least
    fold: Callable[..., int | None]
    variadic: bool = False  # min(a, b, c) nests: (min (min a b) c)


@dataclass(frozen=True)
class Macro:
    """An expression over `params` (and `aliases`, expressions over the params) that the call stands for."""

    params: tuple[str, ...]
    text: str
    aliases: tuple[tuple[str, str], ...] = ()
    body: ast.AST = field(init=False, compare=False)
    alias_bodies: tuple[tuple[str, ast.AST], ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        names = set(self.params) | {a for a, _ in self.aliases}
        object.__setattr__(self, "body", _resolve(self.text, names))
        object.__setattr__(self, "alias_bodies", tuple((a, _resolve(t, set(self.params))) for a, t in self.aliases))

    def expand(self, args: list[ast.AST]) -> ast.AST:
        """The resolved tree of this form with `args` (resolved trees) for its parameters."""
        env: dict[str, ast.AST] = dict(zip(self.params, args))
        for name, tree in self.alias_bodies:
            env[name] = _substitute(tree, env)
        return _substitute(self.body, env)


@dataclass(frozen=True)
class Special:
    """Implemented by the egglog back end's method `method`; `condition`: it tests, rather than computes."""

    method: str
    condition: bool = False


def _resolve(text: str, params: set[str]) -> ast.AST:
    expr = parse_expr(text, Loc("<egglog form>", 1, 1))
    problems = bind_names(expr, params)
    assert not problems, f"egglog form {text!r}: {problems}"
    return expr.resolved.body


def _substitute(tree: ast.AST, env: dict[str, ast.AST]) -> ast.AST:
    class Fill(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            r = ref(n)
            return copy.deepcopy(env[n.id]) if r is not None and r.kind == "bound" and n.id in env else n

    return Fill().visit(copy.deepcopy(tree))


# ------------------------------------------------------------------ fold_alu
# fold_alu(X) (runtime/engine/helpers.py) per op, as (guard, value) over X's sources: A and B are the CONST
# sources' args, D their dtype, S the first source. The guards state in i64 what fold_alu declines: egglog
# computes the same values, and an overflow fails the match.
_FOLD_ALIASES = (("S", "X.src[0]"), ("D", "X.src[0].dtype"), ("A", "X.src[0].arg"), ("B", "X.src[1].arg"))
_FIT = "fits_int64({r}) and fits_dtype(D, {r})"
_SHIFT = "A >= 0 and 0 <= B < 8 * D.itemsize"
_FOLD_TEXT: dict[Ops, tuple[str, str]] = {
    **{op: ("is_int(X) and " + _FIT.format(r=f"A {sym} B"), f"A {sym} B")
       for op, sym in ((Ops.ADD, "+"), (Ops.SUB, "-"), (Ops.MUL, "*"))},
    **{op: ("is_int(X) and B != 0 and " + _FIT.format(r=f"{fn}(A, B)"), f"{fn}(A, B)")
       for op, fn in ((Ops.IDIV, "c_div"), (Ops.MOD, "c_mod"))},
    Ops.MAX: ("is_int(X) and fits_int64(A, B)", "max(A, B)"),
    Ops.NEG: ("is_int(X) and " + _FIT.format(r="-A"), "-A"),
    Ops.SHL: (f"is_int(X) and {_SHIFT} and " + _FIT.format(r="A << B"), "A << B"),
    Ops.SHR: (f"is_int(X) and {_SHIFT} and fits_int64(A)", "A >> B"),
    **{op: ("fits_int64(A, B)", f"A {sym} B") for op, sym in ((Ops.AND, "&"), (Ops.OR, "|"), (Ops.XOR, "^"))},
    **{op: ("is_int(S) and fits_int64(A, B)", f"A {sym} B")
       for op, sym in ((Ops.CMPLT, "<"), (Ops.CMPNE, "!="), (Ops.CMPEQ, "=="))},
}
FOLD_ALU: dict[Ops, tuple[Macro, Macro]] = {
    op: (Macro(("X",), guard, _FOLD_ALIASES), Macro(("X",), value, _FOLD_ALIASES))
    for op, (guard, value) in _FOLD_TEXT.items()}
assert set(FOLD_ALU) == FOLDED_OPS


# ------------------------------------------------------------------ the table
EGG_FORMS: dict[str, Prim | Macro | Special] = {
    "int": Prim(None, 1, int),
    "abs": Prim("abs", 1, abs),
    "min": Prim("min", 2, min, variadic=True),
    "max": Prim("max", 2, max, variadic=True),
    # egglog's i64 `/` and `%` truncate toward zero, as c_div and c_mod do
    "c_div": Prim("/", 2, lambda a, b: c_div(a, b) if b != 0 else None),
    "c_mod": Prim("%", 2, lambda a, b: c_mod(a, b) if b != 0 else None),
    "ceil_div": Macro(("a", "b"), "-((-a) // b)"),
    "is_const": Macro(("x",), "x.op is Ops.CONST"),
    "is_int": Special("is_int", condition=True),
    "fits_int64": Special("fits_int64", condition=True),
    "fits_dtype": Special("fits_dtype", condition=True),
    "fold_alu": Special("fold_alu"),
    "const_like": Special("const_like"),
    "const": Special("const"),
    # quantifiers and filters over source lists: relations and list functions defined by rules
    "any": Special("any", condition=True),
    "all": Special("all", condition=True),
    # helpers of finitely many inputs egglog can name: tabulated at build time by calling them
    "reduce_start": Special("reduce_start"),
    "zero_of": Special("zero_of"),
    # the codegen's gate implication: a subset test of conjuncts, as relations defined by rules
    "implies": Special("implies", condition=True),
}
assert set(EGG_FORMS) <= set(HELPERS)
