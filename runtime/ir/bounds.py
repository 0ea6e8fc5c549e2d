"""vmin/vmax: interval analysis of integer and boolean expressions.

The rules are the table of `bounds_table.py`, compiled here into one Python function per op when this
module is imported (the egglog analysis is rendered from the same table by the compiler). Integer
division and modulo follow C (truncate toward zero), the semantics of every backend rulec generates
code for.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from rulec.runtime.ir.bounds_table import BOUNDS, Case, arity_of, source_names
from rulec.runtime.ir.ops import Ops

if TYPE_CHECKING:
    from rulec.runtime.ir.uop import UOp


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


def _limits(u: UOp) -> tuple:
    return u.dtype.scalar.min, u.dtype.scalar.max


def _mask(x: int) -> int:
    return (1 << x.bit_length()) - 1


# ------------------------------------------------------------------ the table, compiled

_NAMES = {"min", "max", "cdiv", "mask"}
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Load, ast.Constant,
            ast.Add, ast.Sub, ast.Mult, ast.USub, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _checked(text: str, variables: set[str]) -> str:
    """An expression of the table, refused unless it uses only what both renderings understand."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"bounds table: {text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in variables | _NAMES:
            raise ValueError(f"bounds table: {text!r}: unknown name {node.id!r}")
    return text


def _case_code(op: str, case: Case, variables: set[str]) -> list[str]:
    conds = [f"({_checked(w, variables)})" for w in case.when]
    if case.dtype == "bool":
        conds.insert(0, "is_bool")
    elif case.dtype == "int":
        conds.insert(0, "not is_bool")
    if case.int_sources:
        conds.append("type(al) is not float and type(ah) is not float")
    body = []
    lo = _checked(case.lo, variables) if case.lo is not None else None
    hi = _checked(case.hi, variables) if case.hi is not None else None
    if case.clip:
        body.append(f"l, h = {lo or 'dlo'}, {hi or 'dhi'}")
        body.append("if dlo <= l and h <= dhi:")
        body.append("    lo, hi = max(lo, l), min(hi, h)")
    else:
        if lo is not None:
            body.append(f"lo = max(lo, {lo})")
        if hi is not None:
            body.append(f"hi = min(hi, {hi})")
    if not conds:
        return body
    return [f"if {' and '.join(conds)}:"] + ["    " + line for line in body]


def _compile(op: str, cases: tuple[Case, ...]) -> Callable:
    names = source_names(op, arity_of(op))
    variables = {f"{n}{e}" for n in names for e in "lh"}
    lines = [f"def bounds_{op}(u, dlo, dhi, is_bool):",
             f"    {', '.join(names)}{',' if len(names) == 1 else ''} = u.src[:{len(names)}]"]
    for n in names:
        lines.append(f"    {n}l, {n}h = {n}.vmin, {n}.vmax")
    lines.append("    lo, hi = dlo, dhi")
    for case in cases:
        lines += ["    " + line for line in _case_code(op, case, variables)]
    lines.append("    return (bool(lo), bool(hi)) if is_bool else (lo, hi)")
    scope = {"cdiv": c_div, "mask": _mask}
    exec(compile("\n".join(lines), f"<bounds of {op}>", "exec"), scope)  # the table is ours, not user data
    return scope[f"bounds_{op}"]


_RULES: dict[Ops, Callable] = {Ops[op]: _compile(op, cases) for op, cases in BOUNDS.items()}
_SOURCES: dict[Ops, int] = {Ops[op]: arity_of(op) for op in BOUNDS}


# ------------------------------------------------------------------ the analysis

def bounds_sources(u: UOp) -> tuple[UOp, ...]:
    """The sources whose bounds `bounds(u)` reads (UOp.vmin fills them first, without recursion)."""
    op = u.op
    if u.dtype.scalar.kind == "float":
        return ()
    if op is Ops.SPECIAL:
        return u.src[:1]
    n = _SOURCES.get(op)
    return u.src[:n] if n is not None and len(u.src) >= n else ()


def bounds(u: UOp) -> tuple:
    """(vmin, vmax) of `u`, as tight as the table allows; dtype limits otherwise."""
    op, dt = u.op, u.dtype.scalar
    if op is Ops.CONST:  # leaves read their arg
        return u.arg, u.arg
    if dt.kind == "float":
        return _limits(u)
    if op is Ops.DEFINE_VAR:
        return u.arg[1], u.arg[2]
    if op is Ops.SPECIAL:  # a GPU thread id: below its bound (Python only: egglog never sees one)
        return 0, u.src[0].vmax - 1 if u.src else _limits(u)[1]
    rule = _RULES.get(op)
    if rule is None or len(u.src) < _SOURCES[op]:
        return _limits(u)
    dlo, dhi = _limits(u)
    return rule(u, dlo, dhi, dt.kind == "bool")
