"""The value-bounds (vmin/vmax) rules of integer and boolean ops: one table, two renderings.

`runtime/ir/bounds.py` compiles it into the Python interval analysis the rewrite engine's guards read, and
`rulec/egglog_prelude.py` renders it as the egglog `analysis` ruleset, so both engines bound every node
alike. The semantics of a table is egglog's: a node's bounds start at its dtype's limits, and every case
whose conditions hold tightens them (the largest `lo` and the smallest `hi` win). A case marked `clip`
applies only when its `lo` and `hi` lie within the dtype (an overflowing sum keeps the limits).

Expressions are Python syntax over the sources' bounds: `al`/`ah` are the first source's vmin/vmax, `bl`/`bh`
the second's, `cl`/`ch` the third's (for WHERE: condition, then the two values, as `cl`/`ch`, `al`/`ah`,
`bl`/`bh`). Functions: `min`, `max`, `cdiv` (C division, truncating toward zero) and `mask(x)`, the least
`2**k - 1` at or above `x >= 0` (allowed only as a `hi`). Division and modulo are C's: every backend
rulec generates code for has them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    when: tuple[str, ...] = ()
    lo: str | None = None
    hi: str | None = None
    clip: bool = False
    dtype: str | None = None  # "bool": only for a bool node; "int": only for a non-bool one
    int_sources: bool = False  # only when the sources' bounds are integers (a float cast truncates)


def _corners(op: str) -> tuple[str, str]:
    c = [f"{op}(al, bl)", f"{op}(al, bh)", f"{op}(ah, bl)", f"{op}(ah, bh)"] if op == "cdiv" else \
        [f"al {op} bl", f"al {op} bh", f"ah {op} bl", f"ah {op} bh"]
    return f"min(min({c[0]}, {c[1]}), min({c[2]}, {c[3]}))", f"max(max({c[0]}, {c[1]}), max({c[2]}, {c[3]}))"


_MUL_LO, _MUL_HI = _corners("*")
_DIV_LO, _DIV_HI = _corners("cdiv")


# How each source is named: the op's sources, in order, take these prefixes.
SOURCE_NAMES = {"WHERE": ("c", "a", "b")}
DEFAULT_NAMES = ("a", "b")

BOUNDS: dict[str, tuple[Case, ...]] = {
    # leaves whose bounds come from a source
    "BIND": (Case("BIND", lo="al", hi="ah"),),
    "RANGE": (Case("RANGE", lo="0", hi="ah - 1"),),
    # unary: clipped, since -vmin leaves the dtype for an unsigned one or for the most negative value; a
    # bool's NEG is NOT (runtime/ir/alu.py), which the limits bound
    "NEG": (Case("NEG", dtype="int", lo="-ah", hi="-al", clip=True),),
    "CAST": (Case("CAST", lo="al", hi="ah", clip=True, int_sources=True),),
    # binary, clipped to the dtype: out of range -> the dtype limits stay
    "ADD": (Case("ADD", lo="al + bl", hi="ah + bh", clip=True),),
    "SUB": (Case("SUB", lo="al - bh", hi="ah - bl", clip=True),),
    "MUL": (Case("MUL", lo=_MUL_LO, hi=_MUL_HI, clip=True),),
    "MAX": (Case("MAX", lo="max(al, bl)", hi="max(ah, bh)"),),
    # C division by a divisor of one sign is monotone in each argument: the corners bound it
    # (clipped: the least value divided by -1 overflows, and wraps)
    "IDIV": (Case("IDIV-pos", when=("bl > 0",), lo=_DIV_LO, hi=_DIV_HI, clip=True),
             Case("IDIV-neg", when=("bh < 0",), lo=_DIV_LO, hi=_DIV_HI, clip=True)),
    "MOD": (Case("MOD-inside", when=("bl > 0", "al >= 0", "ah < bl"), lo="al", hi="ah"),
            Case("MOD-lo-pos", when=("bl > 0", "al >= 0"), lo="0"),
            Case("MOD-lo-neg", when=("bl > 0", "al < 0"), lo="max(al, 1 - bh)"),
            Case("MOD-hi-nonpos", when=("bl > 0", "ah <= 0"), hi="0"),
            Case("MOD-hi-pos", when=("bl > 0", "ah > 0"), hi="min(ah, bh - 1)")),
    # comparisons: 0/1
    "CMPLT": (Case("CMPLT-true", when=("ah < bl",), lo="1", hi="1"),
              Case("CMPLT-false", when=("al >= bh",), lo="0", hi="0")),
    "CMPNE": (Case("CMPNE-disjoint-lt", when=("ah < bl",), lo="1", hi="1"),
              Case("CMPNE-disjoint-gt", when=("bh < al",), lo="1", hi="1"),
              Case("CMPNE-point", when=("al == ah", "bl == bh", "al == bl"), lo="0", hi="0")),
    "CMPEQ": (Case("CMPEQ-disjoint-lt", when=("ah < bl",), lo="0", hi="0"),
              Case("CMPEQ-disjoint-gt", when=("bh < al",), lo="0", hi="0"),
              Case("CMPEQ-point", when=("al == ah", "bl == bh", "al == bl"), lo="1", hi="1")),
    # bitwise: a bool node as logic, non-negative ints by their magnitude
    "AND": (Case("AND-bool", dtype="bool", lo="min(al, bl)", hi="min(ah, bh)"),
            Case("AND-int", dtype="int", when=("al >= 0", "bl >= 0"), lo="0", hi="min(ah, bh)")),
    "OR": (Case("OR-bool", dtype="bool", lo="max(al, bl)", hi="max(ah, bh)"),
           Case("OR-int", dtype="int", when=("al >= 0", "bl >= 0"), lo="0", hi="mask(max(ah, bh))")),
    "XOR": (Case("XOR-bool-same", dtype="bool", when=("al == ah", "bl == bh", "al == bl"), lo="0", hi="0"),
            Case("XOR-bool-diff", dtype="bool", when=("al == ah", "bl == bh", "al != bl"), lo="1", hi="1"),
            Case("XOR-int", dtype="int", when=("al >= 0", "bl >= 0"), lo="0", hi="mask(max(ah, bh))")),
    "WHERE": (Case("WHERE-true", when=("cl == ch", "cl != 0"), lo="al", hi="ah"),
              Case("WHERE-false", when=("cl == ch", "cl == 0"), lo="bl", hi="bh"),
              Case("WHERE", lo="min(al, bl)", hi="max(ah, bh)")),
}


def source_names(op: str, n: int) -> tuple[str, ...]:
    return SOURCE_NAMES.get(op, DEFAULT_NAMES)[:n]


def arity_of(op: str) -> int:
    """How many sources the cases of `op` read."""
    return len(SOURCE_NAMES.get(op, ())) or (1 if op in ("BIND", "RANGE", "NEG", "CAST") else 2)
