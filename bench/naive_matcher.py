"""A naive matcher for benchmarks: interprets the compiler's pattern trees at every node.

It runs the same rules as the generated matcher (same order, same commutative
variants, same result semantics), but walks each `Pat` and result term at run
time instead of running generated straight-line code. Guards are compiled once
from the same Python translation the generator uses, so the comparison isolates
pattern matching and result building.
"""
from __future__ import annotations

from typing import Any

from rulec.exprs import HELPERS, Expr
from rulec.model import NOARG, Pat, Rule, TCapture, TConst, TExpr, TIf, TNode, TReplace, TSplice
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.engine.genlib import as_node
from rulec.runtime.engine.helpers import OPERATORS
from rulec.runtime.engine.matcher import Matcher, RuleInfo
from rulec.runtime.ir.ops import OP_INFO, Ops
from rulec.runtime.ir.uop import UOp
from rulec.variants import pattern_variants, rule_can_refuse

_ENV = {"Ops": Ops, "dtypes": dtypes, **{f"h_{k}": v for k, v in HELPERS.items()}, **OPERATORS}


def _compile(e: Expr):
    return compile(e.python, "<guard>", "eval")


def _eval(code, binds: dict[str, Any]) -> Any:
    return eval(code, _ENV, {f"v_{k}": v for k, v in binds.items()})


def match(p: Pat, n: UOp, binds: dict[str, Any]) -> bool:
    if p.ops is not None and n.op not in p.ops:
        return False
    if p.dtypes is not None and n.dtype not in p.dtypes:
        return False
    if p.arg is not NOARG and n.arg != p.arg:
        return False
    if p.name is not None:
        prev = binds.get(p.name)
        if prev is not None and prev is not n:
            return False
        binds[p.name] = n
    if p.src is not None:
        k = len(p.src)
        if (p.rest is None and len(n.src) != k) or len(n.src) < k:
            return False
        for cp, cn in zip(p.src, n.src):
            if not match(cp, cn, binds):
                return False
        if p.rest:
            binds[p.rest] = n.src[k:]
    return True


class _Builder:
    def __init__(self, codes: dict[int, Any]):
        self.codes = codes

    def expr(self, e: Expr, binds):
        code = self.codes.get(id(e))
        if code is None:
            code = self.codes[id(e)] = _compile(e)
        return _eval(code, binds)

    def value(self, t, binds):
        return t.value if isinstance(t, TConst) else self.expr(t.expr, binds)

    def dtype(self, d, binds) -> DType:
        return d if isinstance(d, DType) else self.expr(d, binds)

    def term(self, t, binds, fallback: DType) -> UOp:
        if isinstance(t, TCapture):
            return binds[t.name]
        if isinstance(t, TIf):
            return self.term(t.then if self.expr(t.cond, binds) else t.orelse, binds, fallback)
        if isinstance(t, TConst):
            return UOp.const(fallback, t.value)
        if isinstance(t, TExpr):
            return as_node(self.expr(t.expr, binds), fallback)
        if isinstance(t, TNode):
            srcs = self.children(t.children, binds, fallback, t.op)
            if t.dtype is not None:
                dt = self.dtype(t.dtype, binds)
            else:
                how = OP_INFO[t.op].result_dtype
                dt = getattr(dtypes, how) if how in ("bool", "void", "index") else \
                    (srcs[1 if how == "src1" else 0].dtype if srcs else fallback)
            return UOp(t.op, dt, srcs, self.value(t.arg, binds) if t.arg is not None else None,
                       self.value(t.tag, binds) if t.tag is not None else None)
        if isinstance(t, TReplace):
            base = binds[t.base]
            kw: dict[str, Any] = {}
            if t.children is not None:
                kw["src"] = self.children(t.children, binds, base.dtype, None)
            if t.dtype is not None:
                kw["dtype"] = self.dtype(t.dtype, binds)
            if t.arg is not None:
                kw["arg"] = self.value(t.arg, binds)
            if t.tag is not None:
                kw["tag"] = self.value(t.tag, binds)
            return base.replace(**kw)
        raise TypeError(t)

    def children(self, children, binds, fallback, op) -> tuple:
        out: list = [None] * len(children)
        sib = None
        for i, c in enumerate(children):
            if isinstance(c, TConst) or (op is Ops.WHERE and i == 0):
                continue
            out[i] = binds[c.name] if isinstance(c, TSplice) else self.term(c, binds, fallback)
            if sib is None:
                sib = out[i][0].dtype if isinstance(c, TSplice) else out[i].dtype
        for i, c in enumerate(children):
            if out[i] is None:
                out[i] = self.term(c, binds, dtypes.bool if (op is Ops.WHERE and i == 0) else (sib or fallback))
        flat: list = []
        for c, v in zip(children, out):
            flat.extend(v) if isinstance(c, TSplice) else flat.append(v)
        return tuple(flat)


def naive_matcher(name: str, rules: list[Rule], dispatch: bool = True) -> Matcher:
    """A Matcher whose rule functions interpret the pattern trees.

    With dispatch=False every rule is tried on every node (no root-op table).
    """
    builder = _Builder({})
    entries = []
    for rid, rule in enumerate(rules):
        if rule.call is not None:
            raise ValueError("the naive matcher runs declarative rules only")
        guard = _compile(rule.when) if rule.when is not None else None
        lets = [(b.name, _compile(b.expr)) for b in rule.lets]
        for variant in pattern_variants(rule.match, rule_can_refuse(rule)):
            def fn(n, ctx, variant=variant, guard=guard, rule=rule, lets=lets):
                binds: dict[str, Any] = {}
                if not match(variant, n, binds):
                    return None
                for name, code in lets:  # once per match, in order, before the guard
                    binds[name] = _eval(code, binds)
                if guard is not None and not _eval(guard, binds):
                    return None
                return builder.term(rule.rewrite, binds, n.dtype)
            entries.append((variant.ops if dispatch else None, rid, fn))
    infos = [RuleInfo(r.name, r.ruleset, r.file, r.loc.line, r.loc.col) for r in rules]
    return Matcher(f"naive:{name}", infos, entries)
