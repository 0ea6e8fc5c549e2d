"""Generate the egglog program of one rule set.

The program is the IR's datatype (one typed constructor per op, `:cost` from rules/ops.yaml),
the load relations, the vmin/vmax analysis (all three from `rulec.runtime.engine.egraph`, which runs
the program), and one egglog `rule` per pure rule and pattern variant, named after the rule.

A rule becomes, for each commutative variant and each op of an op set in its pattern (egglog
has no disjunction), and for each alternative of its guard in disjunctive normal form:

    (rule ((= _root (ADD _d x (CONST _d1 0 _g1) _g2)) <guard atoms> <computed values>)
          ((union _root <result>))
          :ruleset rules :name "add-zero")

A variable-arity op's sources are one list, `(STORE _d (SCons target (SCons value rest)) _a _g)`, so a
`...rest` capture is the list's tail and splices at the end of a result's sources; a rule whose result
builds ops its match lacks and costs more (a lowering) also subsumes what it matched (`_directed`).

Guards and computed values are this module's egglog back end of the guard language: it reads the
tree exprs.py resolved (every name already a capture, let, helper or namespace member), and each
helper's egglog form from the one table in egglog_forms.py (comprehensions over source lists become
relations and list functions defined by rules; helpers of finitely many inputs, tables computed at build
time). They are evaluated in the query, in
egglog's i64: a primitive that fails (overflow, division by zero) makes the match fail, which is
what `fits_int64(...)` asks for in the Python matcher. What egglog cannot express (callbacks, rest
captures of fixed-arity ops, new args, shapes, helpers without a form, ...) makes the rule *skipped*,
with the reason; the build records
it in the manifest and the egglog engine refuses such a rule set unless asked to run the rest.

Every emitted rule is checked by egglog itself at build time, one rule at a time with a file
name per rule; a rule egglog rejects is skipped with egglog's message (never a traceback).
"""
from __future__ import annotations

import ast
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from rulec.runtime.engine import egraph as E
from rulec.runtime.ir.dtype import DType
from rulec.runtime.engine.helpers import bounded_lshift
from rulec.runtime.ir.ops import OP_INFO, Ops

from . import __version__
from . import egglog_prelude as P
from .egglog_forms import EGG_FORMS, FOLD_ALU, Macro, Prim, Special
from .emit_python import comment_text
from .exprs import ref
from .model import NOARG, Pat, Rule, TCapture, TConst, TExpr, TNode, TReplace, TSplice, term_walk
from .patterns import DTYPE_CLASSES
from .variants import pattern_variants

MAX_VARIANTS = 64  # egglog rules per YAML rule (op-set x commutative x guard alternatives)

# names egglog or this program uses; captures with these names are renamed
_RESERVED = {"vmin", "vmax", "dt", "dmin", "dmax", "pow2m1", "min", "max", "abs", "log2", "not", "and", "or",
             "xor", "set", "union", "rule", "let", "delete", "panic", "e", "d", "l", "h", "lo", "hi", "Ref"}


@dataclass
class EggProgram:
    text: str
    skipped: list = field(default_factory=list)  # (Rule, reason)
    rules: list = field(default_factory=list)  # (Rule, [egglog rule names])


class Unsupported(Exception):
    """The rule uses something the egglog engine cannot express."""


class Dead(Exception):
    """This pattern variant can never match a node the e-graph holds."""


# ======================================================================== values in guards and results

@dataclass
class Info:
    """What a pattern node binds: its op, dtype expression, source expressions and arg expressions."""

    op: Ops
    dtype: str
    kids: list[str]
    args: list[str]
    kid_infos: list[Info | None]
    srcs: str | None = None  # a variable-arity op: its whole source list
    tag: str = "0"  # its tag reference
    tail: str | None = None  # ... and the list after `kids` (None: `kids` are all of them)


_NOSTATIC = object()


@dataclass
class V:
    kind: str  # int | node | dtype | str | none | op | tuple | src
    expr: str = ""
    static: Any = _NOSTATIC
    info: Info | None = None
    items: list | None = None

    @property
    def known(self) -> bool:
        return self.static is not _NOSTATIC


def _fmt(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover
        return type(node).__name__


class _Lazy:
    def __init__(self, fn: Callable[[], str]):
        self.fn = fn
        self.value: str | None = None

    def __call__(self) -> str:
        if self.value is None:
            self.value = self.fn()
        return self.value


def _lit(s: str) -> _Lazy:
    z = _Lazy(lambda: s)
    z.value = s
    return z


@dataclass
class R:
    expr: str
    dtype: _Lazy


# ======================================================================== one variant of one rule

class _Variant:
    def __init__(self, em: EggEmitter, rule: Rule, pat: Pat):
        self.em = em
        self.rule = rule
        self.pat = pat
        self.atoms: list[str] = []
        self.global_atoms: list[str] = []  # dtype lookups, needed by every alternative
        self.caps: dict[str, str] = {}  # capture name -> egglog var
        self.cap_info: dict[str, Info | None] = {}
        self.counter = itertools.count()
        self.dt_of: dict[str, str] = {}
        self.ops_used: set[Ops] = set()
        self.rests = {p.rest for p in rule.match.walk() if p.rest}
        self.rest_vars: dict[str, str] = {}  # rest captures of variable-arity ops -> their Srcs variable
        self.locals: dict[str, V] = {}  # a comprehension's variable, while its condition is translated
        self.node_args: dict[str, str] = {}  # capture variable -> its arg reference, where one is an :arg
        # let names stand for their expressions: egglog computes a value once per match anyway
        self.lets = {b.name: b.expr.resolved.body for b in rule.lets}

    def let_body(self, n: ast.AST | None) -> ast.AST | None:
        """The expression a let name stands for, where `n` is one."""
        r = ref(n) if isinstance(n, ast.Name) else None
        return self.lets.get(n.id) if r is not None and r.kind == "bound" else None

    def fresh(self, prefix: str) -> str:
        return f"_{prefix}{next(self.counter)}"

    def var_for(self, name: str) -> str:
        v = self.caps.get(name)
        if v is None:
            v = name if name not in _RESERVED and not name.startswith("_") else f"c_{name}"
            self.caps[name] = v
        return v

    # ---------------------------------------------------------------- patterns
    def pattern(self) -> tuple[str, _Lazy]:
        p = self.pat
        if p.ops is None:
            root = self.var_for(p.name) if p.name else "_root"
            d = self.fresh("d")
            self.atoms.append(f"(= {d} (dt {root}))")
            self.dt_of[root] = d
            self.cap_info[p.name or ""] = None
            return root, _lit(d)
        root = self.var_for(p.name) if p.name else "_root"
        term, info = self.node(p)
        self.atoms.insert(0, f"(= {root} {term})")
        if p.name:
            self.cap_info[p.name] = info
        return root, _lit(info.dtype)

    def dtype_constraint(self, dts: frozenset | None) -> str:
        if dts is None:
            return self.fresh("d")
        names = sorted(d.name for d in dts if E.dtype_key(d) is not None)
        if not names:
            raise Dead("its :dtype names no dtype the egglog engine encodes")
        if len(names) == 1:
            return E.egg_string(names[0])
        v = self.fresh("d")
        self.atoms.append(f"({self.em.dtype_set(names)} {v})")
        return v

    def srcs_term(self, kids: list[str], tail: str) -> str:
        """A source list: (SCons k0 (SCons k1 ... tail))."""
        for k in reversed(kids):
            tail = f"(SCons {k} {tail})"
        return tail

    def node(self, p: Pat) -> tuple[str, Info]:
        """The egglog term of a pattern node with one op; named inner nodes get an `=` atom."""
        (op,) = p.ops
        self.ops_used.add(op)
        d = self.dtype_constraint(p.dtypes)
        var = E.variadic(op)
        n = E.arity(op)
        kids: list[str] = []
        kid_infos: list[Info | None] = []
        srcs = list(p.src) if p.src is not None else []
        tail = None
        if p.src is not None and not var:
            if p.rest is None and len(srcs) != n:
                raise Dead(f"{op.name} has {n} sources, the pattern {len(srcs)}")
            if len(srcs) > n:
                raise Dead(f"{op.name} has {n} sources, the pattern at least {len(srcs)}")
            if p.rest and p.rest in self.used_names():
                raise Unsupported(f"the rest capture ...{p.rest} of a fixed-arity {op.name} is used")
        for c in srcs:
            term, info = self.child(c)
            kids.append(term)
            kid_infos.append(info)
        if var:
            if p.src is None:
                tail = self.fresh("l")
            elif p.rest is None:
                tail = "(SNil)"
            elif p.rest:
                tail = self.rest_var(p.rest)
            else:
                tail = self.fresh("l")
            src_fields = [self.srcs_term(kids, tail)]
        else:
            while len(kids) < n:
                kids.append(self.fresh("w"))
                kid_infos.append(None)
            src_fields = kids
        args: list[str] = []
        if op is Ops.CONST:
            if p.arg is NOARG:
                args = [self.fresh("a")]
            else:
                args = [self.const_pattern_arg(p.arg)]
                if isinstance(p.arg, bool):
                    if d.startswith("_"):
                        self.atoms.append(f'(= {d} "bool")')
                    elif d != '"bool"':
                        raise Dead("a bool constant pattern on a non-bool dtype")
        elif op is Ops.SPECIAL:  # its arg, the thread dimension, is an integer field
            if p.arg is NOARG:
                args = [self.fresh("a")]
            elif type(p.arg) is int and E.is_i64(p.arg):
                args = [str(p.arg)]
            else:
                raise Dead(f"SPECIAL's arg is an integer; :arg {p.arg!r} never equals it")
        elif op.name in E.ARG_OPS:
            if p.arg is not NOARG:
                raise Dead(f"{op.name}'s arg is a tuple; a literal :arg never equals it")
            args = [self.fresh("a") for _ in E.ARG_OPS[op.name]]
        elif op in E.PLAIN_OPS:
            if p.arg is not NOARG and p.arg is not None:
                raise Dead(f"nodes of {op.name} have no arg")
        else:
            args = [self.arg_pattern(p.arg)]
        tag = self.fresh("g")  # patterns match any tag, as the python matcher does
        info = Info(op, d, kids, args, kid_infos, srcs=src_fields[0] if var else None,
                    tail=tail if var else None, tag=tag)
        return f"({op.name} {' '.join([d, *src_fields, *args, tag])})", info

    def rest_var(self, name: str) -> str:
        v = self.var_for(name)
        self.rest_vars[name] = v
        return v

    def arg_pattern(self, arg: Any) -> str:
        """The arg reference a literal :arg stands for (None, an op), or a fresh variable."""
        if arg is NOARG:
            return self.fresh("a")
        if arg is None:
            return str(E.ARG_NONE)
        if type(arg) is Ops:
            return str(E.op_arg_ref(arg))
        raise Unsupported(f":arg {arg!r}: args other than None and ops are run-time references in egglog, "
                          "which a literal cannot name")

    def const_pattern_arg(self, v: Any) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, int):
            if not E.is_i64(v):
                raise Dead(f"constant {v} does not fit an i64")
            return str(v)
        if isinstance(v, float) and v.is_integer() and E.is_i64(int(v)):
            return str(int(v))  # 2.0 == 2 in the Python matcher too
        raise Dead(f"constant {v!r}: only integer and bool constants are encoded")

    def child(self, c: Pat) -> tuple[str, Info | None]:
        if c.ops is None:
            if c.name:
                v = self.var_for(c.name)
                self.cap_info.setdefault(c.name, None)
                return v, self.cap_info.get(c.name)
            return self.fresh("w"), None
        term, info = self.node(c)
        if c.name:
            v = self.var_for(c.name)
            self.atoms.append(f"(= {v} {term})")
            if self.cap_info.get(c.name) is None:
                self.cap_info[c.name] = info
            return v, info
        return term, info

    def used_names(self) -> set[str]:
        names = set(self.rule.when.names) if self.rule.when is not None else set()
        for b in self.rule.lets:
            names |= b.expr.names
        for t in term_walk(self.rule.rewrite):
            if isinstance(t, (TCapture, TSplice)):
                names.add(t.name)
            elif isinstance(t, TExpr):
                names |= t.expr.names
            elif isinstance(t, TReplace):
                names.add(t.base)
        return names

    # ---------------------------------------------------------------- dtypes of captures
    def dtype_of(self, v: V) -> str:
        if v.info is not None:
            return v.info.dtype
        d = self.dt_of.get(v.expr)
        if d is None:
            d = self.fresh("d")
            self.global_atoms.append(f"(= {d} (dt {v.expr}))")
            self.dt_of[v.expr] = d
        return d

    # ---------------------------------------------------------------- expressions
    def fail(self, node: ast.AST, why: str) -> Unsupported:
        return Unsupported(f"`{_fmt(node)}`: {why}")

    def val(self, n: ast.AST) -> V:
        if isinstance(n, ast.Constant):
            v = n.value
            if isinstance(v, bool):
                return V("int", "1" if v else "0", static=v)
            if isinstance(v, int):
                if not E.is_i64(v):
                    raise self.fail(n, "constant does not fit an i64")
                return V("int", str(v), static=v)
            if v is None:
                return V("none", static=None)
            if isinstance(v, float) and v.is_integer() and E.is_i64(int(v)):
                return V("int", str(int(v)), static=int(v))
            if isinstance(v, str) and v.isprintable():
                return V("str", E.egg_string(v), static=v)
            raise self.fail(n, "only integer, bool, None and plain string constants")
        r = ref(n)
        if isinstance(n, ast.Name):
            if r is not None and r.kind == "local" and n.id in self.locals:
                return self.locals[n.id]
            if r is None or r.kind != "bound":
                raise self.fail(n, "not a capture")
            if n.id in self.lets:
                return self.val(self.lets[n.id])
            if n.id in self.rest_vars:
                return V("srcs", self.rest_vars[n.id])
            if n.id in self.rests:
                raise self.fail(n, "the rest capture of a fixed-arity op is a tuple of sources, which egglog "
                                   "does not have")
            return V("node", self.var_for(n.id), info=self.cap_info.get(n.id))
        if isinstance(n, ast.Attribute):
            if r is not None and r.kind == "op":
                return V("op", static=r.value)
            if r is not None and r.kind == "dtype":
                return V("dtype", E.egg_string(r.value.name), static=r.value)
            if r is not None:
                raise self.fail(n, "op groups have no egglog form")
            return self.attr(n, self.val(n.value))
        if isinstance(n, ast.Subscript):
            base = self.val(n.value)
            if isinstance(n.slice, ast.Slice):
                raise self.fail(n, "slices are not supported")
            idx = self.val(n.slice)
            if not (idx.kind == "int" and idx.known):
                raise self.fail(n, "index must be a constant")
            i = int(idx.static)
            if base.kind == "src" and base.info is not None:
                known = len(base.info.kids)
                if not (0 <= i < known or (base.info.tail in (None, "(SNil)") and -known <= i < 0)):
                    raise self.fail(n, "index beyond the sources the pattern names")
                return V("node", base.info.kids[i], info=base.info.kid_infos[i])
            if base.kind == "tuple" and base.items is not None and -len(base.items) <= i < len(base.items):
                return base.items[i]
            raise self.fail(n, "indexing is supported on .src of a pattern node with sources, and on args")
        if isinstance(n, ast.BinOp):
            a, b = self.val(n.left), self.val(n.right)
            if a.kind != "int" or b.kind != "int":
                raise self.fail(n, "arithmetic on non-integers")
            return self.arith(n, type(n.op), a, b)
        if isinstance(n, ast.UnaryOp):
            a = self.val(n.operand)
            if a.kind != "int":
                raise self.fail(n, "arithmetic on a non-integer")
            if isinstance(n.op, ast.UAdd):
                return a
            if isinstance(n.op, ast.USub):
                return V("int", str(-a.static), static=-a.static) if a.known else V("int", f"(- 0 {a.expr})")
            if isinstance(n.op, ast.Invert):
                return V("int", str(~a.static), static=~a.static) if a.known else V("int", f"(- -1 {a.expr})")
            raise self.fail(n, "`not` gives a bool; use it in a condition")
        if isinstance(n, ast.Call):
            return self.call(n)
        if isinstance(n, (ast.Tuple, ast.List)):
            return V("tuple", items=[self.val(e) for e in n.elts])
        if isinstance(n, ast.ListComp):
            return self.list_filter(n)
        raise self.fail(n, f"{type(n).__name__} has no egglog translation here")

    def attr(self, n: ast.Attribute, base: V) -> V:
        a = n.attr
        if base.kind == "node":
            info = base.info
            if a in ("vmin", "vmax"):
                return V("int", f"({a} {base.expr})")
            if a == "dtype":
                return V("dtype", self.dtype_of(base))
            if a == "ranges":
                self.em.props.add("ranges")
                t = self.fresh("l")
                self.atoms.append(f"(= {t} (ranges-of {base.expr}))")
                return V("srcs", t)
            if info is not None:
                if a == "arg":
                    if info.op.name in E.INT_ARG_OPS:
                        return V("int", info.args[0])
                    if info.op is Ops.DEFINE_VAR:
                        return V("tuple", items=[V("str", info.args[0]), V("int", info.args[1]),
                                                 V("int", info.args[2])])
                    if info.op is Ops.RANGE:
                        return V("tuple", items=[V("int", info.args[0]), V("str", info.args[1])])
                    if info.op in E.PLAIN_OPS:
                        return V("none", static=None)
                    return V("argref", info.args[0])
                if a == "op":
                    return V("op", static=info.op)
                if a == "src":
                    return V("src", info=info)
                if a == "tag":
                    return V("argref", info.tag)
            if a == "op":
                return V("opof", base.expr)  # only `x.op is Ops.X` can use it: an existential test
            if a in ("arg", "src", "tag"):
                raise self.fail(n, f"`.{a}` of a capture whose op the pattern does not fix")
            raise self.fail(n, f"`.{a}` is not available in egglog (only .arg .op .src .dtype .vmin .vmax)")
        if base.kind == "dtype" and a == "itemsize" and not base.known:
            return V("int", f"(dsize {base.expr})")
        if base.kind == "dtype" and a in _DTYPE_FLAGS and not base.known:
            self.em.dtype_flags.add(a)  # a table over the scalar dtypes: a pointer's key has no row (no match)
            return V("int", f"(dtype-{a} {base.expr})")
        if base.kind == "dtype" and base.known:
            d: DType = base.static
            if a in ("is_int", "is_float", "is_unsigned"):
                v = bool(getattr(d, a))
                return V("int", "1" if v else "0", static=v)
            if a in ("itemsize",):
                return V("int", str(d.itemsize), static=d.itemsize)
        raise self.fail(n, f"`.{a}` is not available in egglog")

    def arith(self, n: ast.AST, op: type, a: V, b: V) -> V:
        if a.known and b.known:
            try:
                v = _PYOPS[op](a.static, b.static)
            except (KeyError, ZeroDivisionError, ValueError):
                raise self.fail(n, "cannot fold") from None
            if isinstance(v, bool):
                v = int(v)
            if not E.is_i64(v):
                raise self.fail(n, "constant does not fit an i64")
            return V("int", str(v), static=v)
        x, y = a.expr, b.expr
        if op in _EGGLOG_INT_OPS:
            return V("int", f"({_EGGLOG_INT_OPS[op]} {x} {y})")
        if op is ast.FloorDiv:
            # Python floors; egglog's `/` truncates. a // b == (a - a mod b) / b, exactly.
            return V("int", f"(/ (- {x} {self.floor_mod(x, y)}) {y})")
        if op is ast.Mod:
            return V("int", self.floor_mod(x, y))
        if op is ast.RShift:
            # egglog's >> fails for shifts outside 0..63; Python's saturate: keep to 0..63
            self.atoms += [f"(<= 0 {y})", f"(< {y} 64)"]
            return V("int", f"(>> {x} {y})")
        if op is ast.LShift:
            # egglog's << wraps around; x << y == x * 2**y, whose overflow fails
            self.atoms += [f"(<= 0 {y})", f"(< {y} 63)"]
            return V("int", f"(* {x} (<< 1 {y}))")
        raise self.fail(n, "this operator has no egglog translation")

    @staticmethod
    def floor_mod(x: str, y: str) -> str:
        return f"(% (+ (% {x} {y}) {y}) {y})"

    # ---------------------------------------------------------------- helpers, by their forms in egglog_forms.py
    def call(self, n: ast.Call) -> V:
        """A helper's value. The front end resolved the name and checked the arity of every helper whose
        signature Python shows; a form's own `nargs` covers the builtins (min(xs) is not min(a, b))."""
        form = EGG_FORMS.get(n.func.id)
        if isinstance(form, Macro):
            return self.val(form.expand(n.args))
        if isinstance(form, Prim) and (len(n.args) == form.nargs or form.variadic and len(n.args) > form.nargs):
            return self.prim(n, form)
        if isinstance(form, Special) and not form.condition:
            return getattr(self, "h_" + form.method)(n)
        raise self.fail(n, f"{n.func.id}() has no egglog translation")

    def prim(self, n: ast.Call, form: Prim) -> V:
        vs = [self.val(a) for a in n.args]
        if any(v.kind != "int" for v in vs):
            raise self.fail(n, "needs integers")
        if all(v.known for v in vs):
            r = form.fold(*(v.static for v in vs))
            if r is not None:
                return V("int", str(r), static=r)
        if form.egg is None:
            return vs[0]
        if len(vs) == 1:
            return V("int", f"({form.egg} {vs[0].expr})")
        expr = vs[0].expr
        for v in vs[1:]:  # (min (min a b) c)
            expr = f"({form.egg} {expr} {v.expr})"
        return V("int", expr)

    def fold(self, n: ast.Call) -> tuple[ast.AST, bool]:
        """fold_alu(x): adds its guard to the query; its value expression, and whether that is a condition."""
        x = self.val(n.args[0])
        if x.kind != "node" or x.info is None:
            raise self.fail(n, "fold_alu needs a node whose op the pattern fixes")
        if x.info.op not in FOLD_ALU:
            raise Dead(f"fold_alu never folds {x.info.op.name}")
        guard, value = (m.expand(n.args) for m in FOLD_ALU[x.info.op])
        alts = self.cond(guard)
        if not alts:
            raise Dead("fold_alu's guard is always false here")
        if len(alts) != 1:
            raise self.fail(n, "fold_alu's guard has alternatives")
        self.atoms.extend(alts[0])
        return value, _is_condition(value)

    def h_fold_alu(self, n: ast.Call) -> V:
        value, is_cond = self.fold(n)
        return V("cond", items=[value]) if is_cond else self.val(value)

    def h_const_like(self, n: ast.Call) -> V:
        x, v = self.val(n.args[0]), self.val(n.args[1])
        if x.kind != "node" or v.kind != "int":
            raise self.fail(n, "const_like(node, integer) only")
        self.em.ops_needed.add(Ops.CONST)
        return V("node", f"(CONST {self.dtype_of(x)} {self.bind_int(v)} 0)",
                 info=Info(Ops.CONST, self.dtype_of(x), [], [v.expr], []))

    def h_const(self, n: ast.Call) -> V:
        d, v = self.val(n.args[0]), self.val(n.args[1])
        if d.kind != "dtype" or v.kind != "int":
            raise self.fail(n, "const(dtype, integer) only")
        return V("node", f"(CONST {d.expr} {self.bind_int(v)} 0)", info=Info(Ops.CONST, d.expr, [], [v.expr], []))

    def h_fits_int64(self, n: ast.Call, neg: bool) -> list[list[str]]:
        if neg:
            raise self.fail(n, "`not fits_int64(...)` cannot be expressed (egglog drops overflowing matches)")
        atoms = []
        for a in n.args:
            v = self.val(a)
            if v.kind != "int":
                raise self.fail(a, "fits_int64 of a non-integer")
            if not v.known and v.expr.startswith("("):
                t = self.fresh("t")
                atoms.append(f"(= {t} {v.expr})")  # computing it is the test
        return [atoms]

    def h_fits_dtype(self, n: ast.Call, neg: bool) -> list[list[str]]:
        if neg:
            raise self.fail(n, "`not fits_dtype(...)` cannot be expressed")
        d = self.val(n.args[0])
        if d.kind != "dtype":
            raise self.fail(n, "first argument is not a dtype")
        atoms = []
        if d.expr == '"bool"':
            return []  # only Python bools fit bool; every value here is an integer
        if d.expr.startswith('"'):
            if d.expr.strip('"') not in E.EGG_DTYPES:
                return []
        else:
            atoms.append(f'(!= {d.expr} "bool")')
        for a in n.args[1:]:
            v = self.val(a)
            if v.kind != "int":
                raise self.fail(a, "fits_dtype of a non-integer")
            x = self.bind_int(v)
            atoms += [f"(<= (dmin {d.expr}) {x})", f"(<= {x} (dmax {d.expr}))"]
        return [atoms]

    def h_is_int(self, n: ast.Call, neg: bool) -> list[list[str]]:
        x = self.val(n.args[0])
        if x.kind != "node":
            raise self.fail(n, "needs a node")
        d = self.dtype_of(x)
        names = sorted(k for k, dd in E.EGG_DTYPES.items() if dd.is_int)
        if d.startswith('"'):  # the pattern fixed the dtype
            return [[]] if (d.strip('"') in names) != neg else []
        if neg:
            raise self.fail(n, "`not is_int(...)` cannot be expressed")
        return [[f"({self.em.dtype_set(names)} {d})"]]

    def h_implies(self, n: ast.Call, neg: bool) -> list[list[str]]:
        """implies(h, g): every conjunct of `g` is one of `h`'s (both split at their boolean ANDs), a
        relation defined by rules (Emitter.implies_relation)."""
        if neg:
            raise self.fail(n, "`not implies(...)` cannot be expressed (a relation holds or is not derived yet)")
        h, g = (self.val(a) for a in n.args)
        if h.kind != "node" or g.kind != "node":
            raise self.fail(n, "implies of two nodes only")
        return [[f"({self.em.implies_relation()} {h.expr} {g.expr})"]]

    # ---------------------------------------------------------------- source lists and comprehensions
    def as_srcs(self, v: V, n: ast.AST) -> str:
        """The Srcs term of a value that is a sequence of nodes."""
        if v.kind == "srcs":
            return v.expr
        if v.kind == "src" and v.info is not None:
            if v.info.srcs is not None:
                return v.info.srcs
            return self.srcs_term(v.info.kids, "(SNil)")
        if v.kind == "tuple" and v.items is not None and all(i.kind == "node" for i in v.items):
            return self.srcs_term([i.expr for i in v.items], "(SNil)")
        raise self.fail(n, f"a {v.kind} is not a sequence of nodes")

    def element_cond(self, comp: ast.AST, with_elt: bool, need_neg: bool):
        """For `... for r in SEQ if C`: (SEQ as Srcs, alternatives where C holds of an element `_h`, where it
        fails (None unless asked)). C may read the element only: the rules that walk the list see no capture."""
        gens = getattr(comp, "generators", None)
        if not gens or len(gens) != 1 or not isinstance(gens[0].target, ast.Name):
            raise self.fail(comp, "only `for x in SEQ` over one sequence has an egglog translation")
        gen = gens[0]
        seq = self.as_srcs(self.val(gen.iter), gen.iter)
        conds = list(gen.ifs) + ([comp.elt] if with_elt else [])
        for c in conds:
            for m in ast.walk(c):
                r = ref(m) if isinstance(m, ast.Name) else None
                if r is not None and r.kind == "bound":
                    raise self.fail(comp, "its condition reads a capture of the rule; egglog walks the list in "
                                          "rules of its own, which see only the element")
        tree: ast.AST = (ast.Constant(True) if not conds else conds[0] if len(conds) == 1
                         else ast.BoolOp(op=ast.And(), values=conds))
        saved = (self.atoms, self.global_atoms)
        self.atoms, self.global_atoms = [], []
        self.locals[gen.target.id] = V("node", "_h")
        try:
            pos = self.cond(tree)
            neg = self.cond(tree, neg=True) if need_neg else None
            glob = self.global_atoms
        finally:
            self.atoms, self.global_atoms = saved
            del self.locals[gen.target.id]
        pos = [glob + a for a in pos]
        neg = [glob + a for a in neg] if neg is not None else None
        return seq, pos, neg

    def list_filter(self, n: ast.ListComp) -> V:
        """`[r for r in SEQ if C]`: a list function, defined by rules over SNil/SCons (egglog_forms: aux)."""
        if not (isinstance(n.elt, ast.Name) and isinstance(n.generators[0].target, ast.Name)
                and n.elt.id == n.generators[0].target.id):
            raise self.fail(n, "only a filter `[x for x in SEQ if C]` has an egglog translation")
        seq, pos, neg = self.element_cond(n, False, True)
        name = self.em.aux("filter", pos, neg)
        return V("srcs", f"({name} {seq})")

    def quantifier(self, n: ast.Call, neg: bool, every: bool) -> list[list[str]]:
        """any(C for r in SEQ) / all(...): a relation on lists, defined by rules (and its negation by the
        other quantifier of the negated condition)."""
        if len(n.args) != 1 or not isinstance(n.args[0], (ast.GeneratorExp, ast.ListComp)):
            raise self.fail(n, f"{n.func.id}() of a comprehension only")
        every = every != neg
        seq, pos, negs = self.element_cond(n.args[0], True, neg)
        name = self.em.aux("all" if every else "any", negs if neg else pos, None)
        return [[f"({name} {seq})"]]

    def h_any(self, n: ast.Call, neg: bool) -> list[list[str]]:
        return self.quantifier(n, neg, False)

    def h_all(self, n: ast.Call, neg: bool) -> list[list[str]]:
        return self.quantifier(n, neg, True)

    # ---------------------------------------------------------------- tabulated helpers
    def h_reduce_start(self, n: ast.Call) -> V:
        x = self.val(n.args[0])
        if x.kind != "node" or x.info is None or x.info.op in E.PLAIN_OPS or x.info.op.name in E.ARG_OPS:
            raise self.fail(n, "reduce_start of a node whose op the pattern fixes (its arg is an op)")
        t = self.fresh("t")
        self.atoms.append(f"(= {t} ({self.em.table('reduce_start')} {x.info.args[0]} {self.dtype_of(x)}))")
        return V("node", t)

    def h_zero_of(self, n: ast.Call) -> V:
        d = self.val(n.args[0])
        if d.kind != "dtype":
            raise self.fail(n, "zero_of of a dtype only")
        t = self.fresh("t")
        self.atoms.append(f"(= {t} ({self.em.table('zero_of')} {d.expr}))")
        return V("node", t)

    def bind_int(self, v: V) -> str:
        """An i64 expression as a query variable (computed, so overflow fails the match), or a literal."""
        if v.known or not v.expr.startswith("("):
            return v.expr
        t = self.fresh("t")
        self.atoms.append(f"(= {t} {v.expr})")
        return t

    # ---------------------------------------------------------------- conditions (DNF)
    def cond(self, n: ast.AST, neg: bool = False) -> list[list[str]]:
        """Alternatives of conjunctions of atoms: [] is False, [[]] is True."""
        let = self.let_body(n)
        if let is not None:
            return self.cond(let, neg)
        if isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)):
            return self.cond_inner(n, neg)
        # a leaf: what evaluating it binds (computed values, shift guards) belongs to its alternatives
        start = len(self.atoms)
        alts = self.cond_inner(n, neg)
        side = self.atoms[start:]
        del self.atoms[start:]
        return [side + a for a in alts]

    def cond_inner(self, n: ast.AST, neg: bool) -> list[list[str]]:
        if isinstance(n, ast.BoolOp):
            parts = [self.cond(v, neg) for v in n.values]
            conj = isinstance(n.op, ast.And) != neg
            if conj:
                out: list[list[str]] = [[]]
                for p in parts:
                    out = [a + b for a in out for b in p]
                    if len(out) > MAX_VARIANTS:
                        raise self.fail(n, "too many alternatives")
                return out
            return [alt for p in parts for alt in p]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return self.cond(n.operand, not neg)
        if isinstance(n, ast.Compare):
            left = n.left
            pieces: list[list[list[str]]] = []
            for op, right in zip(n.ops, n.comparators):
                pieces.append(self.compare(n, type(op), left, right, neg))
                left = right
            if not neg:  # a < b < c: all of them
                out = [[]]
                for p in pieces:
                    out = [a + b for a in out for b in p]
                return out
            return [alt for p in pieces for alt in p]  # not (a < b < c): any one fails
        form = EGG_FORMS.get(n.func.id) if isinstance(n, ast.Call) else None
        if isinstance(form, Macro):
            return self.cond(form.expand(n.args), neg)
        if isinstance(form, Special) and form.condition:
            return getattr(self, "h_" + form.method)(n, neg)
        v = self.val(n)
        if v.kind == "int":
            if v.known:
                return [[]] if bool(v.static) != neg else []
            return [[f"({'=' if neg else '!='} {v.expr} 0)"]]
        if v.known:
            return [[]] if bool(v.static) != neg else []
        raise self.fail(n, "not a condition egglog can test")

    def op_test(self, n: ast.AST, x: V, op: Ops, neg: bool) -> list[list[str]]:
        """`x.op is X`: the class of x holds an e-node of X; `is not X`: it holds one of another op (opaque
        ones included, by their op). Both are existential, as every test on an e-class is."""
        if x.info is not None:
            return [[]] if (x.info.op is op) != neg else []
        if not neg:
            self.ops_used.add(op)
            fields = [self.fresh("d")] + [self.fresh("w") for _ in range(len(E.ctor_fields(op)) - 1)]
            return [[f"(= {x.expr} ({op.name} {' '.join(fields)}))"]]
        o = self.fresh("o")
        return [[f"(op-is {x.expr} {o})", f"(!= {o} {E.egg_string(op.name)})"]]

    def compare(self, whole: ast.AST, op: type, ln: ast.AST, rn: ast.AST, neg: bool) -> list[list[str]]:
        if neg:
            op = _NEGATE[op]
        if op in (ast.In, ast.NotIn):
            if not isinstance(rn, (ast.Tuple, ast.List, ast.Set)):
                raise self.fail(whole, "`in` needs a literal tuple")
            if op is ast.In:
                return [alt for e in rn.elts for alt in self.compare(whole, ast.Eq, ln, e, False)]
            out: list[list[str]] = [[]]
            for e in rn.elts:
                part = self.compare(whole, ast.NotEq, ln, e, False)
                out = [a + b for a in out for b in part]
            return out
        a, b = self.val(ln), self.val(rn)
        if "argref" in (a.kind, b.kind):
            ref, other = (a, b) if a.kind == "argref" else (b, a)
            if op not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                raise self.fail(whole, "an arg reference compares with `is`/`==` only")
            if other.kind == "argref":
                want = other.expr
            elif other.kind == "op" and other.known:
                want = str(E.op_arg_ref(other.static))
            elif other.kind == "none":
                want = str(E.ARG_NONE)
            else:
                raise self.fail(whole, f"an arg held by reference compares with an op, None or another such "
                                       f"arg only, not a {other.kind}")
            return [[f"({'=' if op in (ast.Is, ast.Eq) else '!='} {ref.expr} {want})"]]
        if "opof" in (a.kind, b.kind):
            node, other = (a, b) if a.kind == "opof" else (b, a)
            if other.kind != "op" or not other.known or op not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                raise self.fail(whole, "the op of a capture can only be tested with `is Ops.X`")
            return self.op_test(whole, V("node", node.expr), other.static, op in (ast.IsNot, ast.NotEq))
        if a.kind == "op" or b.kind == "op":
            if op not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                raise self.fail(whole, "ops compare with `is` only")
            if a.known and b.known:
                return [[]] if ((a.static is b.static) == (op in (ast.Is, ast.Eq))) else []
            raise self.fail(whole, "an op test on a capture whose op the pattern does not fix")
        if a.kind == "none" or b.kind == "none":
            if a.known and b.known:
                same = a.static is b.static
                return [[]] if same == (op in (ast.Is, ast.Eq)) else []
            other = b if a.kind == "none" else a
            if other.kind in ("int", "node", "dtype", "str", "cond") and op in (ast.Is, ast.Eq, ast.IsNot, ast.NotEq):
                # an encoded value is never None
                return [] if op in (ast.Is, ast.Eq) else [[]]
            raise self.fail(whole, "comparison with None")
        if a.known and b.known and a.kind == b.kind:
            try:
                r = _PYCMP[op](a.static, b.static)
            except TypeError:
                raise self.fail(whole, "cannot compare") from None
            return [[]] if r else []
        if a.kind != b.kind:
            raise self.fail(whole, f"compares a {a.kind} with a {b.kind}")
        if a.kind in ("node", "dtype", "str"):
            if op in (ast.Eq, ast.Is):
                return [[f"(= {a.expr} {b.expr})"]]
            if op in (ast.NotEq, ast.IsNot):
                return [[f"(!= {a.expr} {b.expr})"]]
            raise self.fail(whole, f"order comparison of {a.kind}s")
        if a.kind != "int":
            raise self.fail(whole, f"comparison of {a.kind}s")
        sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=", ast.NotEq: "!=",
               ast.Is: "=", ast.IsNot: "!="}[op]
        return [[f"({sym} {a.expr} {b.expr})"]]

    # ---------------------------------------------------------------- results
    def term(self, t: Any, fallback: _Lazy) -> R:
        if isinstance(t, TCapture) and t.name in self.lets:
            return self.value_term(self.lets[t.name], t.name, fallback)
        if isinstance(t, TCapture):
            v = V("node", self.var_for(t.name), info=self.cap_info.get(t.name))
            if t.name in self.rests:
                raise Unsupported(f"result `{t.name}`: a rest capture")
            return R(v.expr, self.lazy_dtype(v))
        if isinstance(t, TConst):
            self.em.ops_needed.add(Ops.CONST)
            return R(f"(CONST {fallback()} {self.const_value(t.value)} 0)", fallback)
        if isinstance(t, TExpr):
            return self.value_term(t.expr.resolved.body, t.expr.text, fallback)
        if isinstance(t, TSplice):
            raise Unsupported(f"result splices ...{t.name}; egglog has no tuples of sources")
        if isinstance(t, TNode):
            return self.tnode(t, fallback)
        if isinstance(t, TReplace):
            return self.treplace(t)
        raise Unsupported(f"result term {type(t).__name__}")

    def resolve(self, t: Any) -> ast.AST | None:
        """The expression a computed result stands for, through let names; None for other terms."""
        body = t.expr.resolved.body if isinstance(t, TExpr) else self.lets.get(t.name) if isinstance(t, TCapture) else None
        while self.let_body(body) is not None:
            body = self.let_body(body)
        return body

    def value_term(self, tree: ast.AST, text: str, fallback: _Lazy) -> R:
        """A computed result: a node, or an integer that becomes a CONST of the fallback dtype."""
        v = self.val(tree)
        if v.kind == "node":
            return R(v.expr, self.lazy_dtype(v))
        if v.kind == "int":
            self.em.ops_needed.add(Ops.CONST)
            return R(f"(CONST {fallback()} {self.bind_int(v)} 0)", fallback)
        raise Unsupported(f"result `{text}`: a {v.kind}, not a node or an integer")

    def lazy_dtype(self, v: V) -> _Lazy:
        return _Lazy(lambda: self.dtype_of(v))

    def const_value(self, value: Any) -> str:
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, int) and E.is_i64(value):
            return str(value)
        if isinstance(value, float) and value.is_integer() and E.is_i64(int(value)):
            return str(int(value))
        raise Unsupported(f"result constant {value!r}: only integer and bool constants")

    def children(self, children: tuple, fallback: _Lazy, op: Ops | None) -> list[R]:
        built: list[R | None] = [None] * len(children)
        sibling: _Lazy | None = None
        for i, c in enumerate(children):
            if isinstance(c, TConst) or (op is Ops.WHERE and i == 0):
                continue
            r = self.term(c, fallback)
            built[i] = r
            sibling = sibling or r.dtype
        for i, c in enumerate(children):
            if built[i] is None:
                want = _lit('"bool"') if (op is Ops.WHERE and i == 0) else (sibling or fallback)
                built[i] = self.term(c, want)
        return built  # type: ignore[return-value]

    def dtype_term(self, d: Any) -> str:
        if isinstance(d, DType):
            key = E.dtype_key(d)
            if key is None:
                raise Unsupported(f"builds a node of dtype {d!r}, which the egglog engine does not encode")
            return E.egg_string(key)
        v = self.val(d.resolved.body)
        if v.kind != "dtype":
            raise Unsupported(f":dtype {d.text} is not a dtype")
        return v.expr

    def source_fields(self, op: Ops, children: tuple, fallback: _Lazy, hint: Ops | None) -> tuple[list[str], list[R]]:
        """The source fields of a built node: one per source, or one list for a variable-arity op, where a
        splice (`...rest`, `...{seq}`) may end the sources."""
        items = list(children)
        tail = "(SNil)"
        if items and isinstance(items[-1], TSplice):
            if not E.variadic(op):
                raise Unsupported(f"splices sources into a fixed-arity {op.name}")
            tail = self.splice(items.pop())
        if any(isinstance(c, TSplice) for c in items):
            raise Unsupported("splices before other sources; egglog's source lists are spliced at the end only")
        if not E.variadic(op) and op is not Ops.CONST and len(items) != E.arity(op):
            raise Unsupported(f"builds a {op.name} with {len(items)} sources; it has {E.arity(op)}")
        kids = self.children(tuple(items), fallback, hint)
        if E.variadic(op):
            return [self.srcs_term([k.expr for k in kids], tail)], kids
        return [k.expr for k in kids], kids

    def splice(self, sp: TSplice) -> str:
        if sp.expr is None:
            if sp.name in self.rest_vars:
                return self.rest_vars[sp.name]
            raise Unsupported(f"result splices ...{sp.name}, the rest of a fixed-arity op")
        return self.as_srcs(self.val(sp.expr.resolved.body), sp.expr.resolved.body)

    def tnode(self, t: TNode, fallback: _Lazy) -> R:
        op = t.op
        tag = self.arg_ref(t.tag, "tag")
        if op is Ops.CONST and t.children:
            raise Unsupported("builds a CONST with sources")
        self.em.ops_needed.add(op)
        fields, kids = self.source_fields(op, t.children, fallback, op)
        if t.dtype is not None:
            d = _lit(self.dtype_term(t.dtype))
        else:
            how = OP_INFO[op].result_dtype
            if how in ("bool", "index", "void"):
                d = _lit(E.egg_string(how))
            else:
                i = 1 if how == "src1" else 0
                d = kids[i].dtype if i < len(kids) else fallback
        args: list[str] = []
        if op.name in E.INT_ARG_OPS:
            if t.arg is None:
                raise Unsupported(f"builds a {op.name} without :arg")
            args = [self.arg_value(t.arg)]
        elif op.name in E.ARG_OPS:
            raise Unsupported(f"builds a {op.name}, whose arg is a tuple")
        elif op in E.PLAIN_OPS:
            if t.arg is not None and not (isinstance(t.arg, TConst) and t.arg.value is None):
                raise Unsupported(f"builds a {op.name} with an :arg; it has none")
        else:
            args = [self.arg_ref(t.arg)]
        return R(f"({op.name} {' '.join([d(), *fields, *args, tag])})", d)

    def arg_ref(self, a: Any, what: str = "arg") -> str:
        """The reference of a built node's :arg (or :tag): None, an op, a copied arg, or an input node."""
        if a is None or (isinstance(a, TConst) and a.value is None):
            return str(E.ARG_NONE)
        if isinstance(a, TConst):
            if type(a.value) is Ops:
                return str(E.op_arg_ref(a.value))
            raise Unsupported(f":{what} {a.value!r}: a new {what} egglog cannot hold (they are run-time references)")
        v = self.val(a.expr.resolved.body)
        if v.kind == "argref":
            return v.expr
        if v.kind == "op" and v.known:
            return str(E.op_arg_ref(v.static))
        if v.kind == "none":
            return str(E.ARG_NONE)
        if v.kind == "node":
            # a node as an arg: the input node its class holds (a rule-built class has none: no match)
            t = self.node_args.get(v.expr)
            if t is None:
                i, t = self.fresh("i"), self.fresh("t")
                self.atoms += [f"(= {v.expr} (Ref {i}))", f"(= {t} (+ {i} {E.NODE_ARG_BASE}))"]
                self.node_args[v.expr] = t
            return t
        raise Unsupported(f":{what} {a.expr.text} computes a new {what}, which has no egglog form")

    def arg_value(self, a: Any) -> str:
        if isinstance(a, TConst):
            return self.const_value(a.value)
        v = self.val(a.expr.resolved.body)
        if v.kind != "int":
            raise Unsupported(f":arg {a.expr.text} is not an integer")
        return self.bind_int(v)

    def treplace(self, t: TReplace) -> R:
        info = self.cap_info.get(t.base)
        if info is None:
            raise Unsupported(f"(replace {t.base} ...) of a capture whose op the pattern does not fix")
        tag = info.tag if t.tag is None else self.arg_ref(t.tag, "tag")
        op = info.op
        self.em.ops_needed.add(op)
        base_dt = _lit(info.dtype)
        if t.children is not None:
            if op is Ops.CONST and t.children:
                raise Unsupported("replace gives a CONST sources")
            fields, _ = self.source_fields(op, t.children, base_dt, None)
        else:
            fields = [info.srcs] if info.srcs is not None else list(info.kids)
        d = _lit(self.dtype_term(t.dtype)) if t.dtype is not None else base_dt
        args = list(info.args)
        if t.arg is not None:
            if op.name in E.INT_ARG_OPS:
                args = [self.arg_value(t.arg)]
            elif op.name in E.ARG_OPS:
                raise Unsupported(f"replace sets the tuple arg of a {op.name}")
            elif op in E.PLAIN_OPS:
                if not (isinstance(t.arg, TConst) and t.arg.value is None):
                    raise Unsupported(f"replace gives a {op.name} an :arg; it has none")
            else:
                args = [self.arg_ref(t.arg)]
        return R(f"({op.name} {' '.join([d(), *fields, *args, tag])})", d)

    # ---------------------------------------------------------------- the whole variant
    def build(self) -> list[tuple[list[str], str]]:
        """The egglog rules (query atoms, action) of this variant: one per alternative of the guard
        (and of a comparison-valued result, which becomes a 1 rule and a 0 rule)."""
        root, root_dt = self.pattern()
        alts: list[list[str]] = [[]]
        if self.rule.when is not None:
            alts = self.cond(self.rule.when.resolved.body)
        if not alts:
            raise Dead("its guard is always false for the nodes egglog holds")
        base_atoms = list(self.atoms)
        rw = self.rule.rewrite
        body = self.resolve(rw)
        if isinstance(body, ast.Call) and body.func.id == "fold_alu":
            start = len(self.atoms)
            value, is_cond = self.fold(body)
            if is_cond:  # a folded comparison: its guard, and the comparison itself as below
                base_atoms += self.atoms[start:]
                body = value
            else:  # a number: the result term computes it (and adds the guard) again
                del self.atoms[start:]
        if body is not None and _is_condition(body):
            # a bool-valued result, {a.arg < b.arg}: True where it holds, False where it does not
            self.em.ops_needed.add(Ops.CONST)
            cases = [(self.cond(body), f"(CONST {root_dt()} 1 0)"),
                     (self.cond(body, neg=True), f"(CONST {root_dt()} 0 0)")]
            extra: list[str] = []
        else:
            result = self.term(rw, root_dt)
            extra = self.atoms[len(base_atoms):]
            cases = [([[]], result.expr)]
        out = []
        for alt in alts:
            for case_alts, expr in cases:
                for calt in case_alts:
                    query = base_atoms + self.global_atoms + alt + calt + extra
                    out.append(_directed(*_cse(query, f"(union {root} {expr})")))
        for op in self.ops_used:
            self.em.ops_needed.add(op)
        return out


def _sexp(text: str) -> list:
    """An s-expression as nested lists of tokens (strings stay whole)."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[()]|[^\s()]+', text)
    stack: list[list] = [[]]
    for t in tokens:
        if t == "(":
            stack.append([])
        elif t == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(t)
    return stack[0]


_COSTS = {**{o.name: E.op_cost(o) for o in Ops}, E.FLOAT_CONST: E.op_cost(Ops.CONST)}
_DTYPE_FLAGS = ("is_int", "is_float", "is_unsigned")
# constructors of values, which extraction chooses among by cost
_VALUE_CTORS = frozenset({*(o.name for o in E.PLAIN_OPS), "CONST", E.FLOAT_CONST})


def _directed(query: list[str], action: str) -> tuple[list[str], str]:
    """A rule whose result builds ops its match does not hold, and costs more than the match, is a lowering
    (a REDUCE becomes a loop and an accumulator, a STORE is closed by an END): extraction keeps the
    cheapest form of an e-class, so it would undo the rule. Such a rule replaces what it matched, as the python engine does: its action
    also subsumes the matched e-node, which no rule then matches and extraction never picks.

    Costs are ops.yaml's: the match costs the nodes of its pattern (a variable bound in the query,
    `(= v TERM)`, its term's), the result the nodes it builds (what it reuses of the match exists already).
    An algebraic rule such as `distribute`, (a+b)*c -> a*c + b*c, builds only ops it matched: it stays an
    equality, whose cheapest side extraction picks."""
    binds: dict[str, Any] = {}
    for atom in query:
        e = _sexp(atom)[0]
        if isinstance(e, list) and len(e) == 3 and e[0] == "=" and isinstance(e[1], str) and isinstance(e[2], list):
            binds.setdefault(e[1], e[2])
        elif isinstance(e, list) and len(e) == 3 and e[0] == "=" and isinstance(e[2], str) and isinstance(e[1], list):
            binds.setdefault(e[2], e[1])

    def cost(t: Any, seen: frozenset = frozenset()) -> int:
        if isinstance(t, str):
            b = binds.get(t)
            return cost(b, seen | {t}) if b is not None and t not in seen else 0
        head = t[0] if t else ""
        if isinstance(head, str) and head.startswith("table-"):
            return _COSTS["CONST"]
        if head not in _COSTS and head != "SCons":
            return 0  # a value (vmin, arithmetic) or a list function: no node of its own
        return _COSTS.get(head, 0) + sum(cost(x, seen) for x in t[1:])

    act = _sexp(action)[0]
    if not (isinstance(act, list) and act[0] == "union" and isinstance(act[1], str)):
        return query, action
    root = binds.get(act[1])
    if root is None or not isinstance(root[0], str) or root[0] not in _COSTS:
        return query, action
    def built(t: Any) -> int:  # the nodes the result adds: what it reuses of the match exists already
        if isinstance(t, str) or not t or (t[0] not in _COSTS and t[0] != "SCons"):
            return 0
        return _COSTS.get(t[0], 0) + sum(built(x) for x in t[1:])

    def heads(t: Any, seen: frozenset = frozenset()) -> set:
        if isinstance(t, str):
            b = binds.get(t)
            return heads(b, seen | {t}) if b is not None and t not in seen else set()
        if not t or (t[0] not in _COSTS and t[0] != "SCons"):
            return set()
        return ({t[0]} - {"SCons"}).union(*(heads(x, seen) for x in t[1:]))

    def built_heads(t: Any) -> set:
        if isinstance(t, str) or not t or (t[0] not in _COSTS and t[0] != "SCons"):
            return set()
        return ({t[0]} - {"SCons"}).union(*(built_heads(x) for x in t[1:]))

    new_heads = built_heads(act[2])
    # a node of a structural op (not elementwise, not a constant) that becomes another op is lowered even
    # when that costs no more (a marked RANGE becomes a SPECIAL): a tie would keep the input's node
    becomes_other = root[0] not in _VALUE_CTORS and root[0] not in new_heads
    if new_heads <= heads(act[1]) or (built(act[2]) <= cost(act[1]) and not becomes_other):
        return query, action
    term = next(a for a in query if a.startswith(f"(= {act[1]} "))[len(f"(= {act[1]} "):-1]
    return query, f"{action} (subsume {term})"


def _const_term(d: DType, v: Any) -> str | None:
    """The e-graph term of the constant `v` of scalar dtype `d` (None: not one the encoding holds)."""
    key = E.egg_string(d.name)
    if d.kind == "float":
        return f"({E.FLOAT_CONST} {key} {E.float_bits(float(v))} 0)"
    if isinstance(v, bool) or (type(v) is int and E.is_i64(v)):
        return f"(CONST {key} {int(v)} 0)"
    return None


def _is_condition(n: ast.AST) -> bool:
    return isinstance(n, (ast.Compare, ast.BoolOp)) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))


_BINDING = re.compile(r"^\(= (_t\d+) (.*)\)$")


def _cse(query: list[str], action: str) -> tuple[list[str], str]:
    """Drop repeated atoms, and computations of a value already computed (renaming its variable)."""
    seen_expr: dict[str, str] = {}
    seen: set[str] = set()
    out: list[str] = []
    rename: dict[str, str] = {}

    def sub(text: str) -> str:
        if not rename:
            return text
        return re.sub(r"\b_t\d+\b", lambda m: rename.get(m.group(0), m.group(0)), text)

    for atom in query:
        atom = sub(atom)
        m = _BINDING.match(atom)
        if m:
            prev = seen_expr.get(m.group(2))
            if prev is not None:
                rename[m.group(1)] = prev
                continue
            seen_expr[m.group(2)] = m.group(1)
        if atom in seen:
            continue
        seen.add(atom)
        out.append(atom)
    return out, sub(action)


_PYOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.BitAnd: lambda a, b: a & b,
          ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.RShift: lambda a, b: a >> b,
          ast.LShift: bounded_lshift}  # `1 << c.arg` with a 62-bit constant: refused (ValueError), not built
# Python operators whose egglog i64 primitive means the same thing (// and % floor in Python only)
_EGGLOG_INT_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_PYCMP = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
          ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
          ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}
_NEGATE = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def op_variants(p: Pat) -> list[Pat]:
    """Patterns with every op set narrowed to one op (egglog has no disjunction)."""
    if p.ops is not None and len(p.ops) > 1:
        choices = [frozenset({o}) for o in sorted(p.ops, key=lambda o: o.value)
                   if p.src is None or E.variadic(o) or (p.rest is None and E.arity(o) == len(p.src))
                   or (p.rest is not None and E.arity(o) >= len(p.src))]
    else:
        choices = [p.ops]
    kids = [op_variants(c) for c in p.src] if p.src is not None else []
    out: list[Pat] = []
    for ops in choices:
        for combo in itertools.product(*kids):
            out.append(replace(p, ops=ops, src=tuple(combo) if p.src is not None else None))
            if len(out) > MAX_VARIANTS:
                return out
    return out


# ======================================================================== rendering rules back as text

def pat_text(p: Pat) -> str:
    if p.ops is None and p.src is None:
        return p.name or "_"
    if p.ops == frozenset({Ops.CONST}) and p.arg is not NOARG and p.src is None and p.dtypes is None:
        body = repr(p.arg)
    else:
        ops = p.ops_text or "|".join(o.name for o in sorted(p.ops or (), key=lambda o: o.value))
        parts = [ops]
        parts += [pat_text(c) for c in p.src or ()]
        if p.rest is not None:
            parts.append("..." + p.rest)
        if p.dtypes is not None:
            parts.append(":dtype " + "|".join(sorted(d.name for d in p.dtypes)))
        if p.arg is not NOARG:
            parts.append(f":arg {p.arg!r}")
        body = parts[0] if p.src is None and len(parts) == 1 else "(" + " ".join(parts) + ")"
    return f"{p.name}@{body}" if p.name else body


def term_text(t: Any) -> str:
    if isinstance(t, TCapture):
        return t.name
    if isinstance(t, TConst):
        return repr(t.value)
    if isinstance(t, TExpr):
        return "{" + t.expr.text + "}"
    if isinstance(t, TSplice):
        return "..." + t.name
    if isinstance(t, (TNode, TReplace)):
        head = t.op.name if isinstance(t, TNode) else f"replace {t.base}"
        parts = [head]
        if isinstance(t, TReplace) and t.children is not None:
            parts.append(":src (" + " ".join(term_text(c) for c in t.children) + ")")
        elif isinstance(t, TNode):
            parts += [term_text(c) for c in t.children]
        for k in ("dtype", "arg", "tag"):
            v = getattr(t, k)
            if v is not None:
                parts.append(f":{k} " + (v.name if isinstance(v, DType) else v.expr.text if hasattr(v, "expr")
                                          and hasattr(v.expr, "text") else term_text(v)))
        return "(" + " ".join(parts) + ")"
    return "?"


# ======================================================================== the emitter

class EggEmitter:
    def __init__(self, name: str, rules: list[Rule]):
        self.name = name
        self.rules = rules
        self.ops_needed: set[Ops] = {Ops[o] for o in E.CORE_OPS}
        self.dtsets: dict[tuple, str] = {}
        self.props: set[str] = set()  # input-node properties the rules read (E.PROPS)
        self.auxes: dict[tuple, tuple[str, str]] = {}  # (kind, alternatives) -> (name, rules text)
        self.tables: dict[str, str] = {}  # helper -> the constructor of its table
        self.dtype_flags: set[str] = set()  # DType properties read of dtypes the pattern does not fix

    def aux(self, kind: str, pos: list[list[str]], neg: list[list[str]] | None) -> str:
        """A list function or relation for a comprehension, defined by rules in the `analysis` ruleset (so it
        is complete before each pass of the rules): `filter` keeps the elements `_h` where `pos` holds and
        drops those where `neg` holds; `any` / `all` hold of the lists with one / only such elements."""
        key = (kind, repr(pos), repr(neg))
        hit = self.auxes.get(key)
        if hit is not None:
            return hit[0]
        name = f"{kind}-{len(self.auxes)}"
        out: list[str] = []

        def rule(tag: str, query: list[str], action: str) -> None:
            out.append(f"(rule ({' '.join(query)}) ({action}) :ruleset analysis :name {E.egg_string(name + tag)})")

        if kind == "filter":
            out.append(f"(constructor {name} (Srcs) Srcs :unextractable)")
            rule("-nil", [f"(= _l ({name} (SNil)))"], "(union _l (SNil))")
            for k, alt in enumerate(pos):
                rule(f"-keep{k}", [f"(= _l ({name} (SCons _h _t)))", *alt], f"(union _l (SCons _h ({name} _t)))")
            for k, alt in enumerate(neg or []):
                rule(f"-drop{k}", [f"(= _l ({name} (SCons _h _t)))", *alt], f"(union _l ({name} _t))")
        elif kind == "any":
            out.append(f"(relation {name} (Srcs))")
            for k, alt in enumerate(pos):
                rule(f"-here{k}", ["(= _l (SCons _h _t))", *alt], f"({name} _l)")
            rule("-later", ["(= _l (SCons _h _t))", f"({name} _t)"], f"({name} _l)")
        else:
            out.append(f"(relation {name} (Srcs))")
            rule("-nil", ["(= _l (SNil))"], f"({name} _l)")
            for k, alt in enumerate(pos):
                rule(f"-cons{k}", ["(= _l (SCons _h _t))", *alt, f"({name} _t)"], f"({name} _l)")
        self.auxes[key] = (name, "\n".join(out))
        return name

    def implies_relation(self) -> str:
        """The relation `implies(h, g)` of runtime/codegen/helpers.py: `-conj` holds of (h, c) when c is h or
        a conjunct of a boolean AND that is one (the conjuncts of h, and h itself, which the Python helper's
        split would only have split further); `(implies h g)` holds when g is a conjunct of h, or a boolean
        AND of two that h implies. The same subset test, read over e-classes: an equality the rules proved
        is a fact, so what it adds is still true. Defined in `analysis`, complete before each pass of the
        rules."""
        key = ("implies", "", "")
        hit = self.auxes.get(key)
        if hit is not None:
            return hit[0]
        name = f"implies-{len(self.auxes)}"
        self.ops_needed.add(Ops.AND)
        out = [f"(relation {name}-conj (Node Node))", f"(relation {name} (Node Node))"]
        and_ = '(= _h (AND _d _a _b _g)) (= _d "bool")'
        for tag, query, action in (
                ("-self", '(= _d (dt _h)) (= _d "bool")', f"({name}-conj _h _h)"),
                ("-left", f"{and_} ({name}-conj _a _c)", f"({name}-conj _h _c)"),
                ("-right", f"{and_} ({name}-conj _b _c)", f"({name}-conj _h _c)"),
                ("-conj", f"({name}-conj _h _c)", f"({name} _h _c)"),
                ("-and", f'(= _c (AND _d _a _b _g)) (= _d "bool") ({name} _h _a) ({name} _h _b)', f"({name} _h _c)")):
            out.append(f"(rule ({query}) ({action}) :ruleset analysis :name {E.egg_string(name + tag)})")
        self.auxes[key] = (name, "\n".join(out))
        return name

    def table(self, helper: str) -> str:
        """The constructor whose e-classes hold a tabulated helper's value: its rows are computed at build
        time by calling the helper itself on every input egglog can name (ops, scalar dtypes)."""
        name = self.tables.get(helper)
        if name is None:
            name = self.tables[helper] = f"table-{helper}"
        return name

    def table_text(self, helper: str, name: str) -> str:
        from rulec.runtime.codegen import helpers as H
        from rulec.runtime.ir.uop import UOp

        dts = [d for d in E.SCALAR_DTYPES.values() if d.kind != "void"]
        rows: list[tuple[tuple[str, ...], Any, DType]] = []
        if helper == "reduce_start":
            sig = "(i64 String)"
            for op in Ops:
                for d in dts:
                    try:
                        v = H.reduce_start(UOp(Ops.REDUCE, d, (), op))
                    except (ValueError, TypeError, KeyError):
                        continue
                    rows.append(((str(E.op_arg_ref(op)), E.egg_string(d.name)), v, d))
        elif helper == "zero_of":
            sig = "(String)"
            for d in dts:
                u = H.zero_of(d)
                rows.append(((E.egg_string(d.name),), u.arg, d))
        else:  # pragma: no cover - EGG_FORMS names only these
            raise AssertionError(helper)
        out = [f"(constructor {name} {sig} Node :unextractable)"]
        for keys, v, d in rows:
            term = _const_term(d, v)
            if term is not None:
                out.append(f"(union ({name} {' '.join(keys)}) {term})")
        return "\n".join(out)

    def dtype_set(self, names: list[str]) -> str:
        key = tuple(sorted(names))
        rel = self.dtsets.get(key)
        if rel is None:
            for cname, members in DTYPE_CLASSES.items():
                if tuple(sorted(d.name for d in members if d.name in E.EGG_DTYPES)) == key:
                    rel = f"dtypes-{cname}"
                    break
            else:
                rel = f"dtypes-set{len(self.dtsets)}"
            self.dtsets[key] = rel
        return rel

    def egg_names(self) -> dict[int, str]:
        counts: dict[str, int] = {}
        for r in self.rules:
            counts[r.name] = counts.get(r.name, 0) + 1
        out = {}
        used: set[str] = set()
        for i, r in enumerate(self.rules):
            base = comment_text(r.name if counts[r.name] == 1 else f"{r.ruleset}/{r.name}")  # printable
            while base in used:
                base += "'"
            used.add(base)
            out[i] = base
        return out

    def translate(self, rule: Rule) -> list[tuple[list[str], str]]:
        if rule.call is not None:
            raise Unsupported("callback")
        if rule.fact is not None:
            raise Unsupported("fact: it records into the python engine's stage context")
        # every source order of the commutative ops: egglog keeps all matches, so more orders only
        # find more (always valid) equalities, whether or not a guard could refuse one of them
        variants = []
        for cv in pattern_variants(rule.match, True):
            variants.extend(op_variants(cv))
        if len(variants) > MAX_VARIANTS:
            raise Unsupported(f"its pattern expands to more than {MAX_VARIANTS} egglog rules "
                              "(op sets x commutative orders)")
        bodies: list[tuple[list[str], str]] = []
        dead: list[str] = []
        for v in variants:
            try:
                bodies.extend(_Variant(self, rule, v).build())
            except Dead as e:
                dead.append(str(e))
        if not bodies:
            raise Unsupported("it can never match in egglog: " + (dead[0] if dead else "no variants"))
        if len(bodies) > MAX_VARIANTS:
            raise Unsupported(f"it needs {len(bodies)} egglog rules (limit {MAX_VARIANTS})")
        return bodies

    def emit(self) -> EggProgram:
        names = self.egg_names()
        skipped: list[tuple[Rule, str]] = []
        blocks: list[tuple[int, Rule, list[str], str]] = []  # index, rule, egg names, text
        for i, rule in enumerate(self.rules):
            try:
                bodies = self.translate(rule)
            except Unsupported as e:
                skipped.append((rule, str(e)))
                continue
            egg_names = [names[i] if k == 0 else f"{names[i]}#{k + 1}" for k in range(len(bodies))]
            blocks.append((i, rule, egg_names, self.rule_text(rule, egg_names, bodies)))
        ops = sorted(self.ops_needed, key=lambda o: o.value)
        support = self.support_text()
        pre = [("prelude", P.prelude_text(ops)), ("analysis", P.analysis_text(ops)), ("prune", P.prune_text(ops)), ("comm", P.comm_text(ops)),
               ("support", support)]
        rejected = validate(pre, [(f"{r.loc.file}:{r.loc.line} (rule {r.name})", text) for _, r, _, text in blocks])
        kept = []
        for (i, rule, egg_names, text), why in zip(blocks, rejected):
            if why is None:
                kept.append((i, rule, egg_names, text))
            else:
                skipped.append((rule, f"egglog rejected the generated rule: {why}"))
        order = {id(r): i for i, r in enumerate(self.rules)}
        skipped.sort(key=lambda rs: order[id(rs[0])])
        text = self.assemble(ops, pre, kept, skipped)
        return EggProgram(text, skipped, [(r, n) for _, r, n, _ in kept])

    def support_text(self) -> str:
        lines = [";; dtype sets named by the patterns"]
        for names, rel in self.dtsets.items():
            lines.append(f"(relation {rel} (String))")
            lines.append(" ".join(f"({rel} {E.egg_string(n)})" for n in names))
        for flag in sorted(self.dtype_flags):
            lines.append(f"(function dtype-{flag} (String) i64 :merge old)  ; DType.{flag}, per scalar dtype")
            lines.append(" ".join(f"(set (dtype-{flag} {E.egg_string(n)}) {int(getattr(d, flag))})"
                                  for n, d in E.SCALAR_DTYPES.items()))
        if self.tables:
            lines.append(";; helpers tabulated at build time (by calling them)")
            lines += [self.table_text(h, n) for h, n in self.tables.items()]
        if self.auxes:
            lines.append(";; comprehensions over source lists, as rules")
            lines += [text for _, text in self.auxes.values()]
        lines.append("(ruleset rules)")
        return "\n".join(lines) + "\n"

    def rule_text(self, rule: Rule, egg_names: list[str], bodies: list[tuple[list[str], str]]) -> str:
        lines = [f"; {comment_text(rule.name)}  {comment_text(rule.loc.file)}:{rule.loc.line}",
                 f";   match:   {comment_text(pat_text(rule.match))}"]
        for b in rule.lets:
            lines.append(f";   let:     {comment_text(b.name)} = {comment_text(b.expr.text)}")
        if rule.when is not None:
            lines.append(f";   when:    {comment_text(rule.when.text)}")
        lines.append(f";   rewrite: {comment_text(term_text(rule.rewrite))}")
        for n, (query, action) in zip(egg_names, bodies):
            q = "\n       ".join(query)
            lines.append(f"(rule ({q})\n      ({action})\n      :ruleset rules :name {E.egg_string(n)})")
        return "\n".join(lines) + "\n"

    def assemble(self, ops, pre, kept, skipped) -> str:
        files = sorted({r.file for r in self.rules})
        w = max([len(r.name) for r in self.rules] + [4])
        head = [f";; Generated by rulec {__version__} from {comment_text(', '.join(files) or '(no files)')}: "
                f"rule set `{comment_text(self.name)}`.",
                ";; Do not edit: change the rule files and run `rulec build`.",
                ";; Run by rulec.runtime.engine.egraph.run_egglog: load; then rounds of (analysis to a fixed point, prune, rules);\n"
                ";; then the cheapest form of each root, by the costs of rules/ops.yaml.",
                f";; {len(kept)} rule(s) compiled, {len(skipped)} skipped:"]
        for _, r, n, _ in kept:
            where = f"{comment_text(r.name):<{w}}  {comment_text(r.loc.file)}:{r.loc.line}"
            head.append(f";;   {where}" + (f"  ({len(n)} egglog rules)" if len(n) > 1 else ""))
        for r, why in skipped:
            where = f"{comment_text(r.name):<{w}}  {comment_text(r.loc.file)}:{r.loc.line}"
            head.append(f";;   {where}  SKIPPED: {comment_text(why)}")
        head.append(f";; @encoding {E.ENCODING_VERSION}")
        head.append(f";; @ops {' '.join(o.name for o in ops)}")
        if self.props:
            head.append(f";; @props {' '.join(sorted(self.props))}")
        parts = ["\n".join(head) + "\n"]
        for kind, text in pre:
            parts.append(f";; @section {kind}\n{text}")
        for i, r, n, text in kept:
            info = {"name": r.name, "ruleset": r.ruleset, "loc": f"{r.loc.file}:{r.loc.line}", "egg": n}
            parts.append(f";; @rule {json.dumps(info)}\n{text}")
        return "\n".join(parts)


def validate(pre: list[tuple[str, str]], rules: list[tuple[str, str]]) -> list[str | None]:
    """Load the program into egglog rule by rule; return egglog's complaint per rule (None: accepted)."""
    from rulec.runtime.engine.egglog_bindings import bindings

    b = bindings()

    eg = b.EGraph()
    for kind, text in pre:
        try:
            eg.run_program(*eg.parse_program(text, filename=f"<{kind}>"))
        except BaseException as e:  # a bug in the shared prelude: no rule can be checked
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            msg = " ".join(str(getattr(e, "context", e)).split())
            return [f"the shared {kind} section failed: {msg}"] * len(rules)
    out: list[str | None] = []
    for fname, text in rules:
        try:
            eg.run_program(*eg.parse_program(text, filename=fname))
            out.append(None)
        except BaseException as e:  # EggSmolError, or a PanicException (BaseException) from Rust
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            out.append(" ".join(str(getattr(e, "context", e)).split()))
    return out


def emit_egglog(name: str, rules: list[Rule]) -> EggProgram:
    """The egglog program of rule set `name`, and the rules it could not express, with reasons."""
    return EggEmitter(name, rules).emit()
