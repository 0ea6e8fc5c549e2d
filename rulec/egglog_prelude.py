"""The fixed part of every rule set's egglog program: the Node datatype, input relations, the bounds
analysis, pruning and commutativity. The compiler writes it (emit_egglog.py); the runtime's egglog engine
(runtime/engine/egraph.py) reads programs and shares only the encoding (constructor fields, dtypes, escaping).
"""
from __future__ import annotations

import ast
from typing import Iterable

from rulec.runtime.ir.bounds_table import BOUNDS, Case, arity_of, source_names
from rulec.runtime.engine.egraph import (EGG_DTYPES, ENCODING_VERSION, FLOAT_CONST, I64_MAX, I64_MIN, OPAQUE_COST,
                                         FLOAT_CONST_FIELDS, PROPS, SCALAR_DTYPES, arity, ctor_fields, egg_string,
                                         op_cost)
from rulec.runtime.ir.ops import OP_INFO, Ops


# ------------------------------------------------------------------ the bounds table, as egglog

_EGG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.Eq: "=", ast.NotEq: "!="}
_EGG_CALLS = {"min": "min", "max": "max", "cdiv": "/"}  # egglog's i64 `/` truncates toward zero, as C's


class _Query:
    """The conjunction a case becomes: every subexpression is bound to a fresh variable, so any i64
    overflow makes the match fail (and the limits stay) instead of wrapping."""

    def __init__(self) -> None:
        self.atoms: list[str] = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def value(self, node: ast.expr, allow_mask: bool = False) -> str:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return str(node.value)
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.bind(f"(- 0 {self.value(node.operand)})")
        if isinstance(node, ast.BinOp) and type(node.op) in _EGG_OPS:
            return self.bind(f"({_EGG_OPS[type(node.op)]} {self.value(node.left)} {self.value(node.right)})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "mask" and allow_mask:
                # the least p = 2**k - 1 with p >= x: every p >= x with p >> 1 <= x matches, the smallest wins
                x, p = self.value(node.args[0]), self.fresh()
                self.atoms += [f"(pow2m1 {p})", f"(>= {p} {x})", f"(<= (>> {p} 1) {x})"]
                return p
            if node.func.id in _EGG_CALLS:
                args = " ".join(self.value(a) for a in node.args)
                return self.bind(f"({_EGG_CALLS[node.func.id]} {args})")
        raise ValueError(f"bounds table: {ast.unparse(node)} has no egglog form")

    def bind(self, term: str) -> str:
        v = self.fresh()
        self.atoms.append(f"(= {v} {term})")
        return v

    def condition(self, text: str) -> None:
        node = ast.parse(text, mode="eval").body
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _EGG_OPS):
            raise ValueError(f"bounds table: condition {text!r} must be one comparison")
        left, right = self.value(node.left), self.value(node.comparators[0])
        self.atoms.append(f"({_EGG_OPS[type(node.ops[0])]} {left} {right})")


def bounds_case(op: str, case: Case) -> tuple[str, str]:
    """(query, action) of one case of the bounds table."""
    names = source_names(op, arity_of(op))
    fields = " ".join(f"f{i}" for i in range(len(ctor_fields(Ops[op])) - 1 - len(names)))
    q = _Query()
    q.atoms.append(f"(= e ({op} d {' '.join(names)}{' ' + fields if fields else ''}))")
    if case.dtype == "bool":
        q.atoms.append('(= d "bool")')
    elif case.dtype == "int":
        q.atoms.append('(!= d "bool")')
    for n in names:
        q.atoms += [f"(= {n}l (vmin {n}))", f"(= {n}h (vmax {n}))"]
    for w in case.when:
        q.condition(w)
    lo = q.value(ast.parse(case.lo, mode="eval").body) if case.lo is not None else None
    hi = q.value(ast.parse(case.hi, mode="eval").body, allow_mask=True) if case.hi is not None else None
    if case.clip:
        q.atoms += ["(= dl (dmin d))", "(= dh (dmax d))"]
        q.atoms += [f"(>= {lo} dl)"] if lo is not None else []
        q.atoms += [f"(<= {hi} dh)"] if hi is not None else []
    action = []
    if lo is not None:
        action.append(f"(set (vmin e) {lo})")
    if hi is not None:
        action.append(f"(set (vmax e) {hi})")
    return " ".join(q.atoms), " ".join(action)


# ------------------------------------------------------------------ program sections

def dtype_sets_text() -> str:
    lines = [";; dtype limits (uint64's upper limit does not fit an i64 and is left out)"]
    for name, d in EGG_DTYPES.items():
        lo, hi = (0, 1) if d.kind == "bool" else (d.min, d.max)
        parts = []
        if I64_MIN <= lo <= I64_MAX:
            parts.append(f"(set (dmin {egg_string(name)}) {int(lo)})")
        if I64_MIN <= hi <= I64_MAX:
            parts.append(f"(set (dmax {egg_string(name)}) {int(hi)})")
        parts.append(f"(set (dsize {egg_string(name)}) {d.itemsize})")
        lines.append(" ".join(parts))
    lines.append(" ".join(f"(pow2m1 {(1 << k) - 1})" for k in range(64)))
    return "\n".join(lines)


def prelude_text(ops: Iterable[Ops]) -> str:
    """Declarations shared by every rule set: the Node and Srcs sorts for `ops`, analysis tables, load rules."""
    ops = sorted(set(ops), key=lambda o: o.value)
    ctor = []
    for op in ops:
        ctor.append(f"(constructor {op.name} ({' '.join(ctor_fields(op))}) Node :cost {op_cost(op)})")
    out = [
        f";; encoding v{ENCODING_VERSION}: (OP dtype source... arg...); CONST (CONST dtype value),",
        ";; DEFINE_VAR (DEFINE_VAR dtype name vmin vmax), RANGE (RANGE dtype end idx kind); a float constant",
        f";; ({FLOAT_CONST} dtype float64-bits); a variable-arity op (OP dtype sources argref), its sources one",
        ";; list (SCons a (SCons b (SNil))); the other non-elementwise ops end in an arg reference (i64).",
        ";; Anything else is an (Opaque id) leaf pointing at the Python node.",
        "(sort Node)",
        "(sort Srcs)",
        "(constructor SNil () Srcs :cost 0)",
        "(constructor SCons (Node Srcs) Srcs :cost 0)",
        *ctor,
        f"(constructor {FLOAT_CONST} ({' '.join(FLOAT_CONST_FIELDS)}) Node :cost {op_cost(Ops.CONST)})",
        f"(constructor Opaque (i64) Node :cost {OPAQUE_COST})",
        "(constructor Ref (i64) Node :unextractable)   ; Python node id -> its e-class",
        "(constructor LRef (i64) Srcs :unextractable)  ; source list id -> its e-class",
        "(function dt (Node) String :merge old)          ; dtype key of an e-class",
        "(relation op-is (Node String))                  ; the ops of an e-class's e-nodes",
        "(function vmin (Node) i64 :merge (max old new)) ; bounds: the tightest wins",
        "(function vmax (Node) i64 :merge (min old new))",
        "(function dmin (String) i64 :merge old)         ; dtype limits",
        "(function dmax (String) i64 :merge old)",
        "(function dsize (String) i64 :merge old)        ; dtype itemsize",
        "(relation scalar-dtype (String))                ; the scalar dtypes (not pointers)",
        "(relation pow2m1 (i64))                         ; 2**k - 1, for OR/XOR bounds",
        *(f"(function {fn} (Node) Srcs :merge old)       ; seeded for the input's nodes" for fn in PROPS.values()),
        dtype_sets_text(),
        " ".join(f"(scalar-dtype {egg_string(n)})" for n in SCALAR_DTYPES),
        "",
        ";; ---- loading: one tab-separated input relation per constructor (id, dtype, source ids, arg)",
        "(ruleset load)",
        "(relation In_SNil (i64))",
        '(rule ((In_SNil l)) ((union (LRef l) (SNil))) :ruleset load :name "load-SNil")',
        "(relation In_SCons (i64 i64 i64))",
        '(rule ((In_SCons l h t)) ((union (LRef l) (SCons (Ref h) (LRef t)))) :ruleset load :name "load-SCons")',
    ]
    loads = [(op.name, ctor_fields(op)) for op in ops] + [(FLOAT_CONST, FLOAT_CONST_FIELDS)]
    for name, fields in loads:
        sorts = ["i64"] + ["i64" if f in ("Node", "Srcs") else f for f in fields]
        vs = [f"f{i}" for i in range(len(fields))]
        args = [f"(Ref {v})" if f == "Node" else f"(LRef {v})" if f == "Srcs" else v for v, f in zip(vs, fields)]
        out.append(f"(relation In_{name} ({' '.join(sorts)}))")
        out.append(f"(rule ((In_{name} i {' '.join(vs)})) ((union (Ref i) ({name} {' '.join(args)})) "
                   f"(set (dt (Ref i)) f0)) :ruleset load :name \"load-{name}\")")
    out += [
        "(relation In_Opaque (i64 String))",
        '(rule ((In_Opaque i o)) ((union (Ref i) (Opaque i)) (op-is (Ref i) o)) :ruleset load :name "load-Opaque")',
        "(relation In_Dtype (i64 String))",
        '(rule ((In_Dtype i d)) ((set (dt (Ref i)) d)) :ruleset load :name "load-dtype")',
        "(relation In_Bounds (i64 i64 i64))",
        '(rule ((In_Bounds i lo hi)) ((set (vmin (Ref i)) lo) (set (vmax (Ref i)) hi)) :ruleset load '
        ':name "load-bounds")',
    ]
    for prop, fn in PROPS.items():
        out += [f"(relation In_{prop} (i64 i64))",
                f'(rule ((In_{prop} i l)) ((set ({fn} (Ref i)) (LRef l))) :ruleset load :name "load-{prop}")']
    return "\n".join(out) + "\n"


def analysis_text(ops: Iterable[Ops]) -> str:
    """The `analysis` ruleset: the dtype of every e-class, and vmin/vmax from the bounds table
    (runtime/ir/bounds_table.py), the table runtime/ir/bounds.py is compiled from.

    All arithmetic happens in the query: a primitive that overflows i64 makes the match fail,
    which leaves the dtype limits in place, as the Python analysis's clipping does.
    """
    have = {o.name for o in ops}
    R: list[str] = ["(ruleset analysis)",
                    ";; the dtype of every e-class, and the dtype limits as default bounds"]

    def rule(name: str, query: str, action: str) -> None:
        R.append(f"(rule ({query})\n      ({action})\n      :ruleset analysis :name \"iv-{name}\")")

    for name, n in [(o.name, len(ctor_fields(o)) - 1) for o in sorted(ops, key=lambda o: o.value)] + [(FLOAT_CONST, len(FLOAT_CONST_FIELDS) - 1)]:
        vs = " ".join(f"f{i}" for i in range(n))
        op = "CONST" if name == FLOAT_CONST else name
        R.append(f"(rule ((= e ({name} d {vs}))) ((set (dt e) d) (op-is e {egg_string(op)})) :ruleset analysis "
                 f":name \"dt-{name}\")")
    rule("default-lo", "(= d (dt e)) (= lo (dmin d))", "(set (vmin e) lo)")
    rule("default-hi", "(= d (dt e)) (= hi (dmax d))", "(set (vmax e) hi)")
    R.append(";; leaves read their arg")
    if "CONST" in have:
        # integer dtypes only: a float constant built from an integer has no bounds here
        rule("CONST", "(= e (CONST d c tg)) (= lo (dmin d))", "(set (vmin e) c) (set (vmax e) c)")
    if "DEFINE_VAR" in have:
        rule("DEFINE_VAR", "(= e (DEFINE_VAR d n lo hi tg))", "(set (vmin e) lo) (set (vmax e) hi)")
    R.append(";; every other op: the bounds table")
    for op, cases in BOUNDS.items():
        if op in have:
            for case in cases:
                rule(case.name, *bounds_case(op, case))
    return "\n".join(R) + "\n"


def prune_text(ops: Iterable[Ops]) -> str:
    """The `prune` ruleset: in an e-class that holds a constant, hide (subsume) every other e-node.

    The constant is the cheapest form of such a class, so extraction loses nothing, and the
    rules stop matching forms like `0 = 0*3` that only feed re-association loops
    (0*3 -> 0*9 -> 0*81 -> ...: true, useless, and unbounded).
    """
    out = ["(ruleset prune)"]
    for o in sorted(ops, key=lambda o: o.value):
        if o is Ops.CONST:
            continue
        vs = " ".join(f"f{i}" for i in range(len(ctor_fields(o))))
        for const, name in (("CONST", o.name), (FLOAT_CONST, f"{o.name}-f")):
            out.append(f"(rule ((= e ({const} cd c ct)) (= e ({o.name} {vs}))) ((subsume ({o.name} {vs}))) "
                       f":ruleset prune :name \"prune-{name}\")")
    return "\n".join(out) + "\n"


def comm_text(ops: Iterable[Ops]) -> str:
    """The optional `comm` ruleset: a op b = b op a for the commutative ops."""
    out = ["(ruleset comm)"]
    for o in sorted(ops, key=lambda o: o.value):
        if OP_INFO[o].commutative and arity(o) == 2:
            out.append(f"(rule ((= e ({o.name} d a b t))) ((union e ({o.name} d b a t))) :ruleset comm "
                       f":name \"comm-{o.name}\")")
    return "\n".join(out) + "\n"
