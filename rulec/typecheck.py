"""Static types of rules: which dtypes the nodes of a pattern can have, and what a result builds.

The checker leans on the IR's typing contract for ALU ops (runtime/ir/uop.py builds nodes this way):
a comparison is a bool and compares two sources of one dtype; WHERE takes a bool condition and its
other two sources have the result's dtype; a shift has the dtype of its first source; every other
ALU op has the dtype of all its sources. With captures (one name, one node), `:dtype` constraints and
literal constants, this gives every pattern node a set of possible dtypes.

From them, per rule:
* a pattern node whose set is empty, or a capture inside itself, can never match: a warning;
* a result that names no dtype keeps the matched node's dtype where both are values (not void, not
  pointers; docs/rules.md, "Types"): a result that provably has another one is an error, one that
  may is checked at run time;
* a literal must fit the dtype it gets (0.5 never becomes an int constant), a `:dtype` expression must
  be a dtype, a CONST's arg a number or a bool, and `(replace x :src (...))` keeps x's arity:
  errors where the types are visible, run-time checks (`Plan`) where they are not.
"""
from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field
from typing import Any

from rulec.runtime.ir.dtype import ALL_DTYPES, DTYPE_BY_NAME, DType
from rulec.runtime.engine.genlib import const_fits
from rulec.runtime.ir.ops import GROUPS, OP_INFO, Ops

from .diagnostics import Loc, Reporter
from .exprs import Expr
from .model import NOARG, Pat, Rule, TCapture, TConst, TExpr, TIf, TNode, TReplace, TSplice
from .patterns import DTYPE_CLASSES

Types = frozenset | None  # the dtypes a node can have; None: not known (any dtype, pointers included)

_VALUE_DTYPES = frozenset(d for d in ALL_DTYPES if d.kind != "void")
_BOOL = frozenset(d for d in ALL_DTYPES if d.kind == "bool")
_COMPARISONS = GROUPS["Comparison"]


# ------------------------------------------------------------------ the ALU typing contract

def _same_dtype_groups(op: Ops) -> list[tuple[int, ...]]:
    """Positions that share one dtype: -1 is the node itself, 0.. its sources."""
    if op in _COMPARISONS:
        return [(0, 1)]
    if op is Ops.WHERE:
        return [(-1, 1, 2)]
    if op is Ops.MULACC:
        return [(-1, 0, 1, 2)]
    if op in (Ops.SHL, Ops.SHR) or op in GROUPS["Unary"]:
        return [(-1, 0)]
    if op in GROUPS["Binary"]:
        return [(-1, 0, 1)]
    return []


def _fixed_dtypes(op: Ops) -> dict[int, tuple[frozenset, str]]:
    """Positions whose dtype the op fixes, with the reason."""
    if op in _COMPARISONS:
        return {-1: (_BOOL, "a comparison is a bool")}
    if op is Ops.WHERE:
        return {0: (_BOOL, "the condition of a WHERE is a bool")}
    return {}


@functools.lru_cache(maxsize=None)  # op sets repeat across rules: a large rule file checks in linear time
def _linked_pairs(ops: frozenset) -> frozenset[tuple[int, int]]:
    """Pairs of positions that share one dtype whichever op of `ops` the node has."""
    out: set[tuple[int, int]] | None = None
    for op in ops:
        pairs = {(a, b) for g in _same_dtype_groups(op) for a in g for b in g if a < b}
        out = pairs if out is None else out & pairs
    return frozenset(out or ())


@functools.lru_cache(maxsize=None)
def _fixed_for_all(ops: frozenset) -> dict[int, tuple[frozenset, str]]:
    fixed: dict[int, tuple[frozenset, str]] | None = None
    for op in ops:
        f = _fixed_dtypes(op)
        fixed = f if fixed is None else {k: v for k, v in fixed.items() if k in f and f[k][0] == v[0]}
    return fixed or {}


# ------------------------------------------------------------------ constants

def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float))


def holds(dt: DType, value: Any) -> bool:
    """Whether a CONST of `dt` holds `value` exactly; the generated code checks the same at run time."""
    return const_fits(dt, value)


def pattern_literal_types(value: Any) -> frozenset:
    """The dtypes of the CONSTs a literal pattern matches (True is tested by identity, 0 == False)."""
    if isinstance(value, bool):
        return _BOOL
    if not _is_number(value) or (isinstance(value, float) and math.isnan(value)):
        return frozenset()
    return frozenset(d for d in _VALUE_DTYPES if holds(d, value))


def describe(types: Types) -> str:
    """A dtype set as :dtype would write it: `ints|floats`, `bool`, `int32|float32`."""
    if types is None:
        return "any dtype"
    if not types:
        return "no dtype"
    left, parts = set(types), []
    for name, members in DTYPE_CLASSES.items():
        if name != "sints" and members <= left and len(members) > 1:
            parts.append(name)
            left -= members
    parts += sorted(d.name for d in left)
    return "|".join(parts)


# ------------------------------------------------------------------ pattern classes

class _Classes:
    """Union-find over pattern nodes (by id) that must have one dtype, with each class's possible dtypes."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.types: dict[int, Types] = {}
        self.reasons: dict[int, list[str]] = {}

    def find(self, k: int) -> int:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def constrain(self, k: int, types: frozenset, reason: str) -> str | None:
        """Narrow k's class to `types`; the message when that leaves no dtype."""
        r = self.find(k)
        old = self.types.get(r)
        new = types if old is None else old & types
        if new == old:
            return None
        reasons = self.reasons.setdefault(r, [])
        self.types[r] = new
        if not new:
            return f"{' and '.join(reasons)}, but {reason}" if reasons else reason
        reasons.append(reason)
        return None

    def of(self, k: int) -> tuple[int, Types]:
        r = self.find(k)
        return r, self.types.get(r)


# ------------------------------------------------------------------ expressions

_ATTR_TYPES = {"dtype": {"DType"}, "scalar": {"DType"}, "vmin": {"int", "float", "bool"},
               "vmax": {"int", "float", "bool"}, "op": {"Ops"}, "src": {"tuple"}, "shape": {"tuple", "NoneType"},
               "size": {"int"}, "ndim": {"int"}, "itemsize": {"int"}, "name": {"str"}, "kind": {"str"},
               "is_int": {"bool"}, "is_float": {"bool"}, "is_unsigned": {"bool"}, "ranges": {"tuple"}}
_CALL_TYPES = {"len": {"int"}, "int": {"int"}, "float": {"float"}, "bool": {"bool"}, "tuple": {"tuple"},
               "isinstance_int": {"bool"}, "fits_int64": {"bool"}, "fits_dtype": {"bool"}, "all": {"bool"},
               "any": {"bool"}, "is_const": {"bool"}, "is_int": {"bool"}, "all_same": {"bool"},
               "const": {"UOp"}, "const_like": {"UOp"}, "ceil_div": {"int"}, "gcd": {"int"},
               "bit_length": {"int"}, "log2": {"int"},
               "fold_alu": {"int", "bool"}}  # or None, where it declines: a guard tests that
_NUMBERS = {"int", "float", "bool"}
_NUMERIC_CALLS = {"min", "max", "abs", "c_div", "c_mod"}  # numbers in, a number out


def expr_types(node: ast.AST, captures: dict[str, str], consts: frozenset = frozenset(),
               lets: dict[str, ast.AST] | None = None) -> set[str] | None:
    """The Python type names an expression can evaluate to, or None when that is not visible.

    `consts` names the captures the pattern fixes to be CONSTs: their `.arg` is a number. `lets` maps the
    rule's let names to their expressions (earlier lets only, as each sees).
    """
    def sub(n: ast.AST) -> set[str] | None:
        return expr_types(n, captures, consts, lets)

    if isinstance(node, ast.Expression):
        return sub(node.body)
    if isinstance(node, ast.Constant):
        return {type(node.value).__name__}
    if isinstance(node, ast.Name) and lets and node.id in lets:
        return sub(lets[node.id])
    if isinstance(node, ast.Name):
        kind = captures.get(node.id)
        return {"UOp"} if kind == "node" else {"tuple"} if kind == "rest" else None
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "dtypes":
            return {"DType"}
        if isinstance(node.value, ast.Name) and node.value.id == "Ops":
            return {"Ops"}
        if node.attr == "arg" and isinstance(node.value, ast.Name) and node.value.id in consts:
            return set(_NUMBERS)
        return _ATTR_TYPES.get(node.attr)
    if isinstance(node, ast.Compare):
        if not any(isinstance(o, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for o in node.ops):
            return {"bool"}  # ==, is, in: a bool even on nodes (== on UOps is identity)
        sides = [sub(v) for v in [node.left, *node.comparators]]
        return {"bool"} if all(t is not None and "UOp" not in t for t in sides) else None  # x < y builds a CMPLT
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return {"bool"}
    if isinstance(node, ast.IfExp):
        a, b = sub(node.body), sub(node.orelse)
        return None if a is None or b is None else a | b
    if isinstance(node, ast.BoolOp):
        parts = [sub(v) for v in node.values]
        return None if any(p is None for p in parts) else set().union(*parts)
    if isinstance(node, (ast.Tuple, ast.List)):
        return {"tuple" if isinstance(node, ast.Tuple) else "list"}
    if isinstance(node, ast.BinOp):
        a, b = sub(node.left), sub(node.right)
        if a is not None and b is not None and a <= _NUMBERS and b <= _NUMBERS:
            return {"int", "float"}
        return None
    if isinstance(node, ast.UnaryOp):
        a = sub(node.operand)
        return {"int", "float"} if a is not None and a <= _NUMBERS else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in captures:
        if node.func.id in _NUMERIC_CALLS:
            args = [sub(a) for a in node.args]
            return {"int", "float"} if args and all(a is not None and a <= _NUMBERS for a in args) else None
        known = _CALL_TYPES.get(node.func.id)
        return set(known) if known else None
    return None


def _describe_py(types: set[str]) -> str:
    if len(types) > 1 and types <= _NUMBERS:
        return "a number"
    names = {"int": "an int", "float": "a float", "bool": "a bool", "str": "a string", "NoneType": "None",
             "tuple": "a tuple", "list": "a list", "DType": "a dtype", "Ops": "an op", "UOp": "a node"}
    return " or ".join(names.get(t, t) for t in sorted(types))


# ------------------------------------------------------------------ the analysis

@dataclass
class Plan:
    """What the generated matcher must still check at run time, because the types were not visible."""

    result_dtype: bool = False  # compare the result's dtype with the matched node's
    literals: set[int] = field(default_factory=set)  # ids of TConsts that may not fit the dtype they get
    dtype_exprs: set[int] = field(default_factory=set)  # ids of :dtype Exprs not known to give a DType
    const_args: set[int] = field(default_factory=set)  # ids of TNode/TReplace whose :arg is a CONST's


@dataclass(frozen=True)
class _T:
    """The type of a term: the pattern class it has the dtype of (if any), and its possible dtypes."""

    cls: int | None
    types: Types
    stated: bool = False  # the term names its dtype (:dtype, or an op with a fixed dtype)


_UNKNOWN = _T(None, None)


class RuleTyper:
    def __init__(self, rule: Rule):
        self.rule = rule
        self.plan = Plan()
        self.diags: list[tuple[str, Loc, str, int]] = []  # (severity, loc, message, length)
        self.classes = _Classes()
        self.capture_pat: dict[str, Pat] = {}
        self._type_pattern()

    def error(self, loc: Loc, message: str, length: int = 1) -> None:
        self.diags.append(("error", loc, message, length))

    # -------------------------------------------------------------- patterns
    def _type_pattern(self) -> None:
        cl = self.classes
        pats = list(self.rule.match.walk())
        for p in pats:
            if p.name is None:
                continue
            first = self.capture_pat.setdefault(p.name, p)
            cl.union(id(first), id(p))
        for p in pats:
            if p.ops and p.src is not None:
                for a, b in _linked_pairs(p.ops):
                    ka = id(p) if a < 0 else (id(p.src[a]) if a < len(p.src) else None)
                    kb = id(p.src[b]) if b < len(p.src) else None
                    if ka is not None and kb is not None:
                        cl.union(ka, kb)
        warned = False
        for p in pats:
            for message in self._constraints(p):
                if message and not warned:
                    self.diags.append(("warning", p.loc, f"pattern can never match: {message}", 1))
                    warned = True
        for p in pats:
            if p.name is not None and not warned:
                inner = next((q for s in p.src or () for q in s.walk() if q.name == p.name), None)
                if inner is not None:
                    self.diags.append(("warning", inner.loc, f"pattern can never match: '{p.name}' would be one "
                                                             f"of its own sources", len(p.name)))
                    warned = True

    def _constraints(self, p: Pat):
        cl = self.classes
        if p.ops:
            for pos, (types, reason) in _fixed_for_all(p.ops).items():
                if pos < 0:
                    yield cl.constrain(id(p), types, reason)
                elif p.src is not None and pos < len(p.src):
                    yield cl.constrain(id(p.src[pos]), types, reason)
        if p.dtypes is not None:
            yield cl.constrain(id(p), frozenset(p.dtypes), f":dtype allows only {describe(p.dtypes)}")
        if p.ops == frozenset({Ops.CONST}) and p.arg is not NOARG:
            types = pattern_literal_types(p.arg)
            reason = (f"a CONST of {p.arg!r} can only be {describe(types)}" if types else
                      f"a CONST holds a number or a bool, not {p.arg!r}")
            yield cl.constrain(id(p), types, reason)

    def expr_types(self, e: Expr) -> set[str] | None:
        consts = frozenset(n for n, p in self.capture_pat.items() if p.ops is not None and p.ops <= {Ops.CONST})
        return expr_types(e.tree, self.rule.captures, consts, {b.name: b.expr.tree.body for b in self.rule.lets})

    def built_const(self, node: ast.AST) -> _T | None:
        """The type of `const_like(x, v)` (x's) and `const(x.dtype, v)` / `const(dtypes.D, v)`, else None."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
            return None
        first = node.args[0]
        if node.func.id == "const_like" and isinstance(first, ast.Name) and self.rule.captures.get(first.id) == "node":
            return self.capture(first.id)
        if node.func.id == "const" and isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
            if first.value.id == "dtypes" and first.attr in DTYPE_BY_NAME:
                return _T(None, frozenset({DTYPE_BY_NAME[first.attr]}))
            if first.attr == "dtype" and self.rule.captures.get(first.value.id) == "node":
                return self.capture(first.value.id)
        return None

    def capture(self, name: str) -> _T:
        p = self.capture_pat.get(name)
        if p is None or self.rule.captures.get(name) == "rest":
            return _UNKNOWN
        return _T(*self.classes.of(id(p)))

    # -------------------------------------------------------------- results
    def check_result(self) -> None:
        t = self.rule.rewrite
        if t is None:
            return
        root = _T(*self.classes.of(id(self.rule.match)))
        res = self.term(t, root)
        if res.stated or (res.cls is not None and res.cls == root.cls):
            return
        if res.types is not None and root.types is not None:
            if len(res.types) == 1 and res.types == root.types:
                return
            if res.types <= _VALUE_DTYPES and root.types <= _VALUE_DTYPES and not res.types & root.types:
                self.error(t.loc, f"the result has a different dtype than the matched node: the node is "
                                  f"{describe(root.types)}, the result {describe(res.types)} (a result that "
                                  f"names no :dtype keeps the matched node's)")
                return
        self.plan.result_dtype = True

    def term(self, t: Any, fallback: _T) -> _T:
        if isinstance(t, TIf):
            a, b = self.term(t.then, fallback), self.term(t.orelse, fallback)
            return a if a == b else _UNKNOWN  # branches that differ are checked at run time
        if isinstance(t, TCapture):
            return self.capture(t.name) if self.rule.captures.get(t.name) == "node" else _UNKNOWN
        if isinstance(t, TConst):
            self.literal(t, fallback.types)
            return fallback
        if isinstance(t, TExpr):
            types = self.expr_types(t.expr)
            if types is not None and not types & (_NUMBERS | {"UOp"}):
                self.error(t.loc, f"a computed result must be a node or a number, but `{t.expr.text}` is "
                                  f"{_describe_py(types)}", len(t.expr.text))
            if types is not None and "UOp" not in types:
                return fallback  # a number: a CONST of the fallback dtype
            return self.built_const(t.expr.tree.body) or _UNKNOWN
        if isinstance(t, TNode):
            kids = self.children(t.children, fallback, t.op)
            if t.dtype is not None:
                res = self.dtype_term(t.dtype)
                res = _T(res.cls, res.types, stated=True)
            else:
                how = OP_INFO[t.op].result_dtype
                if how in ("bool", "void", "index"):
                    res = _T(None, frozenset(d for d in ALL_DTYPES if d.name == how), stated=True)
                else:
                    i = 1 if how == "src1" else 0
                    res = kids[i] if i < len(kids) and kids[i] is not None else fallback
            if t.op is Ops.CONST and t.arg is not None:
                self.const_arg(t, t.arg, res.types)
            return res
        if isinstance(t, TReplace):
            base = self.capture(t.base) if self.rule.captures.get(t.base) == "node" else _UNKNOWN
            if t.children is not None:
                self.children(t.children, base, None)
                self.replace_arity(t)
            res = base
            if t.dtype is not None:
                res = self.dtype_term(t.dtype)
                res = _T(res.cls, res.types, stated=True)
            pat = self.capture_pat.get(t.base)
            if t.arg is not None and pat is not None and pat.ops is not None and pat.ops <= {Ops.CONST}:
                self.const_arg(t, t.arg, res.types)
            return res
        return _UNKNOWN

    def children(self, children: tuple, fallback: _T, op: Ops | None) -> list[_T | None]:
        """Type the children as the emitter builds them: a literal gets its first non-literal sibling's dtype."""
        out: list[_T | None] = [None] * len(children)
        sibling: _T | None = None
        for i, c in enumerate(children):
            if isinstance(c, TConst) or (op is Ops.WHERE and i == 0):
                continue
            if isinstance(c, TSplice):
                sibling = sibling or _UNKNOWN
                continue
            out[i] = self.term(c, fallback)
            sibling = sibling or out[i]
        for i, c in enumerate(children):
            if out[i] is None and not isinstance(c, TSplice):
                want = _T(None, _BOOL) if (op is Ops.WHERE and i == 0) else (sibling or fallback)
                out[i] = self.term(c, want)
        return out

    def literal(self, t: TConst, types: Types) -> None:
        v = t.value
        length = len(repr(v))
        if not _is_number(v):
            self.error(t.loc, f"a constant must be a number or a bool, not {v!r}", length)
            return
        if types is None or not all(holds(d, v) for d in types):
            if types is not None and not any(holds(d, v) for d in types):
                self.error(t.loc, f"the constant {v!r} does not fit the dtype it gets here "
                                  f"({describe(types)})", length)
            else:
                self.plan.literals.add(id(t))

    def const_arg(self, t: TNode | TReplace, arg: Any, types: Types) -> None:
        self.plan.const_args.add(id(t))
        if isinstance(arg, TConst):
            if not _is_number(arg.value):
                self.error(arg.loc, f"the arg of a CONST must be a number or a bool, not {arg.value!r}",
                           len(repr(arg.value)))
            elif types is not None and not any(holds(d, arg.value) for d in types):
                self.error(arg.loc, f"the constant {arg.value!r} does not fit the CONST's dtype "
                                    f"({describe(types)})", len(repr(arg.value)))
        elif isinstance(arg, TExpr):
            found = self.expr_types(arg.expr)
            if found is not None and not found & _NUMBERS:
                self.error(arg.loc, f"the arg of a CONST must be a number or a bool, but `{arg.expr.text}` is "
                                    f"{_describe_py(found)}", len(arg.expr.text))

    def dtype_term(self, d: DType | Expr) -> _T:
        if isinstance(d, DType):
            return _T(None, frozenset({d}) if d in ALL_DTYPES else None)
        tree = d.tree.body
        if isinstance(tree, ast.Attribute) and isinstance(tree.value, ast.Name):
            if tree.value.id == "dtypes":
                dt = DTYPE_BY_NAME.get(tree.attr)
                return _T(None, frozenset({dt}) if dt is not None else None)
            if tree.attr == "dtype" and self.rule.captures.get(tree.value.id) == "node":
                return self.capture(tree.value.id)
        found = self.expr_types(d)
        if found is not None and "DType" not in found:
            self.error(d.loc, f":dtype must be a dtype, but `{d.text}` is {_describe_py(found)}", len(d.text))
        elif found != {"DType"}:
            self.plan.dtype_exprs.add(id(d))
        return _UNKNOWN

    def replace_arity(self, t: TReplace) -> None:
        pat = self.capture_pat.get(t.base)
        if pat is None or pat.ops is None or any(isinstance(c, TSplice) for c in t.children or ()):
            return
        arities = {OP_INFO[op].arity for op in pat.ops}
        n = len(t.children or ())
        if None in arities or n in arities:
            return
        takes = " or ".join(map(str, sorted(arities)))
        s = "" if arities == {1} else "s"
        self.error(t.loc, f"'{t.base}' is {pat.ops_text or 'a node'}, which takes {takes} source{s}, but replace "
                          f"gives it {n}", len(t.base))


def analyze(rule: Rule) -> RuleTyper:
    """Type one rule: its diagnostics and its run-time checks (`.plan`)."""
    typer = RuleTyper(rule)
    if rule.call is None:
        typer.check_result()
    return typer


def check_rule_types(rule: Rule, rep: Reporter) -> None:
    for severity, loc, message, length in analyze(rule).diags:
        (rep.error if severity == "error" else rep.warning)(loc, message, length)


def rule_plan(rule: Rule) -> Plan:
    return analyze(rule).plan
