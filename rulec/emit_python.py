"""Generate a Python matcher module for one rule set.

Two forms of the same rules, in the style of Go's rulegen (`rewritegeneric.go`):
- per rule (and per commutative variant of its pattern), one function of straight-line checks, listed in
  ENTRIES: the traced path calls these one by one, to time and count each rule;
- per root op, one function (OPS) trying that op's rules in rule order, with the sources unpacked once and,
  where many rules test the first source's op, a switch on it: the untraced fast path. It returns
  (result, rule index) on a hit, and raises RuleFailed(rule index, error) for an error in a rule.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import replace as dc_replace
from typing import Any

from rulec.runtime.ir.dtype import DType
from rulec.runtime.engine.helpers import OPERATORS
from rulec.runtime.ir.ops import OP_INFO, Ops

from . import __version__
from .diagnostics import printable
from .exprs import HELPER_TABLES, HELPER_PREFIX, Expr
from .model import NOARG, FactSpec, Pat, Rule, TCapture, TConst, TExpr, TIf, TNode, TReplace, TSplice
from .typecheck import rule_plan
from .variants import pattern_variants, rule_can_refuse

V = "v_"  # capture variables; must agree with exprs.CAPTURE_PREFIX
# Markers in emitted lines, resolved per form (a rule function returns; a block in an op function breaks out
# of its rule's `while True:`). NUL cannot occur in emitted code: literals and comments escape it.
FAIL = "\x00F"  # the rule does not apply
FACT = "\x00K"  # a fact was recorded: the rule declines all the same, but the traced path counts it as fired
RET = "\x00R\x00"  # prefix of a statement that returns the expression after it
SWITCH_MIN = 4  # rules of one root op testing the first source's op before a switch on that op pays
SWITCH_WIDE = 4  # a rule accepting more first-source ops than this is tried in every case
SWITCH_MAX_CASES = 16  # more distinct first-source ops than this: no switch (the elif chain would be long)


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name, flags=re.ASCII)


def py_str(text: str) -> str:
    """The Python string literal of `text`: every rule-file string reaches the module through this.

    repr() escapes quotes, backslashes and every character that is not printable (newlines, NUL,
    U+2028, ...), so the literal is one line of valid Python whatever the text holds.
    """
    return repr(str(text))


def _literal(value: Any) -> str:
    """Python source for a literal; repr() of inf and nan is not valid Python."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({py_str(str(value))})"
    return py_str(value) if isinstance(value, str) else repr(value)


def comment_text(text: str) -> str:
    """`text` for a one-line comment: whitespace runs as one space, other unprintable characters escaped.

    A line break would end the comment and start code; this leaves none (in Python, egglog, or for
    str.splitlines, which also breaks at U+2028, U+0085, ...).
    """
    return printable(" ".join(text.split()))


_ASSIGN = re.compile(r"(\s*)(\w+) = (\w+(?:\.src(?:\[\d+:?\])?)?)$")
_UNPACK = re.compile(r"(\s*)((?:\w+, )*\w+,?) = (\w+\.src)$")


def _drop_dead(lines: list[str]) -> list[str]:
    """`lines` without the bindings nothing reads: a capture or source that only a check needed.

    Only side-effect-free bindings (a name, a source, a slice of the sources) are dropped; an unpacking
    keeps its place (for the others) with `_` for each unread name.
    """
    while True:
        text = "\n".join(lines)
        uses = {}
        for w in re.findall(r"\w+", text):
            uses[w] = uses.get(w, 0) + 1
        out, changed = [], False
        for ln in lines:
            m = _ASSIGN.fullmatch(ln)
            if m and uses.get(m[2], 0) == 1:
                changed = True
                continue
            m = _UNPACK.fullmatch(ln)
            if m:
                names = [x for x in m[2].replace(" ", "").split(",") if x]
                kept = [x if uses.get(x, 0) > 1 else "_" for x in names]
                if all(x == "_" for x in kept):  # checked arity or known: nothing is lost
                    changed = True
                    continue
                if kept != names:
                    ln = f"{m[1]}{', '.join(kept)}{',' if len(kept) == 1 else ''} = {m[3]}"
            out.append(ln)
        if not changed:
            return out
        lines = out


def _reuse_guard_values(lines: list[str], at: int, guard: str) -> list[str]:
    """A helper call the guard makes and the result makes again is made once: the guard's conjuncts become
    one check each (the same evaluation, in the same order), and the first conjunct that makes the call
    unconditionally binds its value to `_g<i>`, which the result then reads."""
    try:
        tree = ast.parse(guard, mode="eval").body
    except SyntaxError:
        return lines
    conjuncts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    after = "\n".join(lines[at + 1:])
    checks: list[str] = []
    hoisted: dict[str, str] = {}  # call text -> the name holding its value

    def reuse(text: str) -> str:
        for ct, name in sorted(hoisted.items(), key=lambda kv: -len(kv[0])):  # an outer call before its inner ones
            text = re.sub(rf"(?<![\w.]){re.escape(ct)}", name, text)
        return text
    for c in conjuncts:
        text = ast.unparse(c)
        for call in _unconditional_calls(c):
            ct = ast.unparse(call)
            if ct in hoisted or not re.search(rf"(?<![\w.]){re.escape(ct)}", after):
                continue
            checks.append(f"_g{len(hoisted)} = {reuse(ct)}")  # inner calls first: this reads their names
            hoisted[ct] = f"_g{len(hoisted)}"
        checks.append(f"if not ({reuse(text)}): {FAIL}")
    if not hoisted:
        return lines
    return lines[:at] + checks + [reuse(ln) for ln in lines[at + 1:]]


def _unconditional_calls(node: ast.AST) -> list[ast.Call]:
    """The helper calls `node` always makes (none under and/or, if-else, a comprehension or a lambda),
    innermost first."""
    found: list[ast.Call] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)):
            return
        if isinstance(n, ast.Compare):  # `a < b < c` stops after a false first comparison
            visit(n.left)
            visit(n.comparators[0])
            return
        for child in ast.iter_child_nodes(n):
            visit(child)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith(HELPER_PREFIX):
            found.append(n)
    visit(node)
    return found


def _resolve(lines: list[str], rid: int | None) -> list[str]:
    """The FAIL and RET markers as statements: of a rule function (rid None), or of a block of an op
    function, which returns (result, rid) for a result that rewrites the node."""
    out = []
    for ln in lines:
        ln = ln.replace(FAIL, "return None" if rid is None else "break")
        ln = ln.replace(FACT, "return FACT_RECORDED" if rid is None else "break")
        i = ln.find(RET)
        if i < 0:
            out.append(ln)
        elif rid is None:
            out.append(ln[:i] + "return " + ln[i + len(RET):])
        else:
            ind, value = ln[:i], ln[i + len(RET):]
            if re.fullmatch(r"[A-Za-z_]\w*", value):  # a capture or a temporary: no need to name it again
                out += [f"{ind}if {value} is not None and {value} is not n: return {value}, {rid}", f"{ind}break"]
                continue
            out += [f"{ind}_r = {value}", f"{ind}if _r is not None and _r is not n: return _r, {rid}", f"{ind}break"]
    return out


class _Fn:
    """State while emitting one rule function."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.bound: set[str] = set()
        self.temps = 0
        self.hoisted: int | None = None  # in an op function: the root's sources, unpacked once, are n_0..
        self.known: dict[str, Ops] = {}  # variables whose op a switch already decided

    def temp(self, expr: str) -> str:
        name = f"_t{self.temps}"
        self.temps += 1
        self.lines.append(f"{name} = {expr}")
        return name


class PythonEmitter:
    def __init__(self, name: str, doc: str, rules: list[Rule]):
        self.name = name
        self.doc = doc
        self.rules = rules
        self.opsets: dict[frozenset, str] = {}
        self.dtsets: dict[frozenset, str] = {}
        self.helpers: set[str] = set()
        self.callbacks: dict[tuple, str] = {}  # (module, function, declared params or None) -> local name
        self.exprs = 0  # expressions emitted so far
        self.lets: set[str] = set()  # the let names of the rule being emitted

    # ---------------------------------------------------------------- module
    def emit(self) -> str:
        funcs: list[str] = []
        entries: list[str] = []
        variants: list[tuple[int, Rule, Pat]] = []
        for rid, rule in enumerate(self.rules):
            for vi, variant in enumerate(pattern_variants(rule.match, rule_can_refuse(rule))):
                fname = f"r{rid}_{_ident(rule.name)}" + (f"_v{vi}" if vi else "")
                funcs.append(self.rule_function(fname, rid, rule, variant))
                root = "None" if variant.ops is None else self.opset(variant.ops)
                entries.append(f"    ({root}, {rid}, {fname}),")
                variants.append((rid, rule, variant))
        # the fast path: one function per root op, in Ops order; wildcard-root rules also get one for any op
        ops_table: list[str] = []
        roots = set().union(*(p.ops for _, _, p in variants if p.ops is not None))
        for op in sorted(roots, key=lambda o: o.value):
            chain = [v for v in variants if v[2].ops is None or op in v[2].ops]
            funcs.append(self.op_function(f"op_{op.name}", op, chain))
            ops_table.append(f"    Ops.{op.name}: op_{op.name},")
        if any(p.ops is None for _, _, p in variants):
            funcs.append(self.op_function("op_any", None, [v for v in variants if v[2].ops is None]))
            ops_table.append("    None: op_any,")
        files = sorted({r.file for r in self.rules})
        head = [
            f"# Generated by rulec {__version__} from {', '.join(map(py_str, files))}: "
            f"rule set {py_str(self.name)}.",
            "# Do not edit: change the rule files and run `rulec build`.",
            py_str(self.doc or self.name),  # the docstring
            "from rulec.runtime.ir.dtype import dtypes",
            "from rulec.runtime.engine.genlib import ExprLimitError, as_node, check_result",
            "from rulec.runtime.engine.genlib import as_dtype, check_kept_dtype, const_arg",
            "from rulec.runtime.engine.helpers import OPERATORS as _OPERATORS, bounded_value",
            *(f"{op} = _OPERATORS[{py_str(op)}]" for op in sorted(OPERATORS)),
            "from rulec.runtime.engine.matcher import Matcher, RuleFailed, RuleInfo",
            "# the ops as plain class attributes: Ops.X on the enum class costs 5x more (runtime/ir/ops.py)",
            "from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops",
            "from rulec.runtime.ir.uop import UOp",
        ]
        if self.helpers:
            for i, (module, table_name, table) in enumerate(HELPER_TABLES):
                used = sorted(h for h in self.helpers if h in table)
                if used:
                    head.append(f"from {module} import {table_name} as _HELPERS{i}")
                    head += [f"{HELPER_PREFIX}{h} = _HELPERS{i}[{py_str(h)}]" for h in used]
        if any(r.fact is not None for r in self.rules):
            head.append("from rulec.runtime.engine.genlib import FACT_RECORDED")
        if self.callbacks:
            head.append("from rulec.runtime.engine.genlib import callback as _callback")
        if any(params is not None for _, _, params in self.callbacks):
            head.append("from rulec.runtime.engine.genlib import callback_result_error")
        for (mod, fn, params), local in self.callbacks.items():
            declared = "" if params is None else f", ({''.join(py_str(p) + ', ' for p in params)})"
            head.append(f"{local} = _callback({py_str(mod)}, {py_str(fn)}{declared})")
        head.append("")
        for s, nm in self.opsets.items():
            head.append(f"{nm} = frozenset({{{', '.join('Ops.' + o.name for o in sorted(s, key=lambda o: o.value))}}})")
        for s, nm in self.dtsets.items():
            head.append(f"{nm} = frozenset({{{', '.join('dtypes.' + d.name for d in sorted(s, key=lambda d: d.name))}}})")
        infos = [f"    RuleInfo({py_str(r.name)}, {py_str(r.ruleset)}, {py_str(r.file)}, {r.loc.line}, {r.loc.col}, "
                 f"{py_str(r.kind)})," for r in self.rules]
        tail = ["RULES = [", *infos, "]", "", "ENTRIES = [", *entries, "]", "", "OPS = {", *ops_table, "}", "",
                f"MATCHER = Matcher({py_str(self.name)}, RULES, ENTRIES, OPS)", ""]
        return "\n".join(head + [""] + funcs + tail)

    def opset(self, ops: frozenset) -> str:
        if ops not in self.opsets:
            self.opsets[ops] = f"_OPS{len(self.opsets)}"
        return self.opsets[ops]

    def dtset(self, dts: frozenset) -> str:
        if dts not in self.dtsets:
            self.dtsets[dts] = f"_DTYPES{len(self.dtsets)}"
        return self.dtsets[dts]

    # ---------------------------------------------------------------- one rule
    def rule_function(self, fname: str, rid: int, rule: Rule, pat: Pat) -> str:
        lines = _resolve(self.rule_body(rid, rule, pat, _Fn()), None)
        body = "\n".join("    " + ln for ln in lines)
        return f"def {fname}(n, ctx):\n    # {comment_text(self.where(rule))}\n{body}\n\n"

    @staticmethod
    def where(rule: Rule) -> str:
        return f"{rule.ruleset}/{rule.name} at {py_str(rule.loc.file)}:{rule.loc.line}:{rule.loc.col}"

    def rule_body(self, rid: int, rule: Rule, pat: Pat, fn: _Fn) -> list[str]:
        """The statements of one rule (variant), with FAIL and RET markers, dead bindings left out."""
        self.plan = rule_plan(rule)  # the run-time checks the static typing left (rulec/typecheck.py)
        exprs_before = self.exprs
        self.match(pat, "n", fn, root=True)
        self.lets = rule.let_names
        for b in rule.lets:  # once per match, in order, before the guard that may read them
            fn.lines.append(f"{V}{b.name} = {self.expr(b.expr)}")
        guard, guard_code = None, ""
        if rule.when is not None:
            guard, guard_code = len(fn.lines), self.expr(rule.when)
            fn.lines.append(f"if not ({guard_code}): {FAIL}")
        if rule.call is not None:
            spec = rule.call
            key = (spec.module, spec.function, spec.params if spec.result else None)
            local = self.callbacks.setdefault(key, f"_cb_{_ident(spec.module)}_{spec.function}")
            args = ", ".join("ctx" if p == "ctx" else V + p for p in spec.params)
            if spec.result is None:
                fn.lines.append(f"{RET}{local}({args})")
            else:  # a typed declaration: what it returns is checked, as the declaration says
                ok = {"node": "isinstance(_r, UOp)", "node?": "_r is None or isinstance(_r, UOp)",
                      "none": "_r is None"}[spec.result]
                fn.lines += [f"_r = {local}({args})", f"if {ok}:", f"    {RET}_r",
                             f"callback_result_error(_r, {py_str(spec.result)})"]
        elif rule.fact is not None:
            self.fact(rule.fact, fn)
        else:
            self.result(rule.rewrite, fn)
        lines = fn.lines if guard is None else _reuse_guard_values(fn.lines, guard, guard_code)
        lines = _drop_dead(lines)
        if self.exprs != exprs_before:  # an expression hit a limit: say which rule (a try costs nothing in 3.11)
            lines = ["try:", *("    " + ln for ln in lines), "except ExprLimitError as e:",
                     f"    raise e.located(RULES[{rid}]) from None"]
        return lines

    # ---------------------------------------------------------------- one root op
    def op_function(self, fname: str, op: Ops | None, entries: list[tuple[int, Rule, Pat]]) -> str:
        """All rules of root op `op` (None: the rules of any root op) in one function, in rule order."""
        arity = OP_INFO[op].arity if op is not None else None
        # each entry with its root pattern narrowed to `op`
        fits = [(rid, rule, pat if op is None else dc_replace(pat, ops=frozenset({op}))) for rid, rule, pat in entries]
        body: list[str] = []
        # unpack the sources once, where every pattern agrees with the op's arity (as the rule functions trust
        # it); a pattern for another source count (a malformed node) keeps its own checks
        hoist = arity is not None and arity > 0 and all(
            p.src is None or (len(p.src) == arity if p.rest is None else len(p.src) <= arity) for _, _, p in fits)
        kids = [f"n_{i}" for i in range(arity)] if hoist else []
        # the first source's ops each entry requires (None: any), for the switch
        # (a wide op set counts as any: its rule keeps its own check, and stays out of the cases)
        firsts = [p.src[0].ops if p.src and p.src[0].ops and len(p.src[0].ops) <= SWITCH_WIDE else None
                  for _, _, p in fits]
        cases: list[Ops] = []
        for ops in firsts:
            for o in sorted(ops or (), key=lambda o: o.value):
                if o not in cases:
                    cases.append(o)
        switch = sum(f is not None for f in firsts) >= SWITCH_MIN and 1 < len(cases) <= SWITCH_MAX_CASES
        if switch:
            body.append("_o = n_0.op" if hoist else "_o = n.src[0].op if n.src else None")
            for i, case in enumerate(cases):
                blocks = [self.block(rid, rule, pat, hoist and arity, {"n_0": case})
                          for (rid, rule, pat), f in zip(fits, firsts) if f is None or case in f]
                body.append(f"{'if' if i == 0 else 'elif'} _o is Ops.{case.name}:")
                body += ["    " + ln for b in blocks for ln in b]
            rest = [self.block(rid, rule, pat, hoist and arity, {})
                    for (rid, rule, pat), f in zip(fits, firsts) if f is None]
            if rest:
                body.append("else:")
                body += ["    " + ln for b in rest for ln in b]
        else:
            for rid, rule, pat in fits:
                body += self.block(rid, rule, pat, hoist and arity, {})
        if hoist:
            used = [k if any(re.search(rf"\b{k}\b", ln) for ln in body) else "_" for k in kids]
            if any(u != "_" for u in used):
                body.insert(0, f"{', '.join(used)}{',' if arity == 1 else ''} = n.src")
        if not body:  # no rule can match `op` (its source count rules them all out)
            body = ["pass"]
        lines = ["_rid = -1", "try:", *("    " + ln for ln in body), "except Exception as e:",
                 "    raise RuleFailed(_rid, e) from None", "return None"]
        what = "any root op" if op is None else f"root op {op.name}"
        return f"def {fname}(n, ctx):\n    # the rules of {what}, in rule order\n" + \
            "".join(f"    {ln}\n" for ln in lines) + "\n"

    def block(self, rid: int, rule: Rule, pat: Pat, hoisted: int | None, known: dict) -> list[str]:
        """One rule inside an op function: a `while True:` left by `break` when the rule does not apply."""
        fn = _Fn()
        fn.hoisted = hoisted or None
        fn.known = known
        lines = _resolve(self.rule_body(rid, rule, pat, fn), rid)
        if lines[-1] != "break":  # every path of a rule ends in a return or a break; this is for the reader
            lines.append("break")
        return [f"# {comment_text(self.where(rule))}", f"_rid = {rid}", "while True:", *("    " + ln for ln in lines)]

    def fact(self, spec: FactSpec, fn: _Fn) -> None:
        """Record into the stage context (a dict), then decline: the node is not rewritten, later rules run."""
        value = self.expr(spec.value) if spec.value is not None else "None"
        if spec.key is not None:
            fn.lines.append(f"ctx[{self.expr(spec.key)}] = {value}")
        else:
            fn.lines.append(f"for _k in {self.expr(spec.keys)}:")
            fn.lines.append(f"    ctx[_k] = {value}")
        fn.lines.append(FACT)

    def result(self, t: Any, fn: _Fn) -> None:
        """The statements that build and return the result; an (if c a b) becomes an if statement."""
        if isinstance(t, TIf):
            inner = _Fn()
            inner.temps = fn.temps
            self.result(t.then, inner)
            fn.temps = inner.temps
            fn.lines.append(f"if {self.expr(t.cond)}:")
            fn.lines += ["    " + ln for ln in inner.lines]
            self.result(t.orelse, fn)
            return
        result = self.term(t, fn, 'n.dtype')
        if self.plan.result_dtype:  # not proven to keep the matched node's dtype
            result = fn.temp(result)
            fn.lines.append(f"if {result}.dtype is not n.dtype: check_kept_dtype(n, {result})")
        fn.lines.append(f"{RET}{result}")

    def match(self, pat: Pat, var: str, fn: _Fn, root: bool = False) -> None:
        out = fn.lines
        if pat.ops is not None and not root and fn.known.get(var) not in pat.ops:
            if len(pat.ops) == 1:
                out.append(f"if {var}.op is not Ops.{next(iter(pat.ops)).name}: {FAIL}")
            else:
                out.append(f"if {var}.op not in {self.opset(pat.ops)}: {FAIL}")
        if pat.dtypes is not None:
            if len(pat.dtypes) == 1:
                out.append(f"if {var}.dtype != dtypes.{next(iter(pat.dtypes)).name}: {FAIL}")
            else:
                out.append(f"if {var}.dtype not in {self.dtset(pat.dtypes)}: {FAIL}")
        if pat.arg is not NOARG:
            cmp = "is not" if isinstance(pat.arg, bool) or pat.arg is None else "!="
            out.append(f"if {var}.arg {cmp} {_literal(pat.arg)}: {FAIL}")
        if pat.name is not None:
            if pat.name in fn.bound:
                out.append(f"if {var} is not {V}{pat.name}: {FAIL}")
            else:
                out.append(f"{V}{pat.name} = {var}")
                fn.bound.add(pat.name)
        if pat.src is None:
            return
        k = len(pat.src)
        arities = {OP_INFO[o].arity for o in pat.ops} if pat.ops is not None else {None}
        known = arities == {k}
        kids = [f"{var}_{i}" for i in range(k)]
        if root and fn.hoisted is not None:  # the op function unpacked n.src once (the caller checked k fits)
            pass
        elif pat.rest is None:
            if not known:
                out.append(f"if len({var}.src) != {k}: {FAIL}")
        elif k and not (len(arities) == 1 and None not in arities and min(arities) >= k):
            out.append(f"if len({var}.src) < {k}: {FAIL}")
        if k and not (root and fn.hoisted is not None):
            if pat.rest is None:
                out.append(f"{', '.join(kids)}{',' if k == 1 else ''} = {var}.src")
            else:
                for i, kid in enumerate(kids):
                    out.append(f"{kid} = {var}.src[{i}]")
        for kid, child in zip(kids, pat.src):
            if child.ops is None and child.src is None and child.dtypes is None and child.arg is NOARG \
                    and child.name is None:
                continue  # wildcard
            self.match(child, kid, fn)
        if pat.rest:
            if pat.rest in fn.bound:
                out.append(f"if {var}.src[{k}:] != {V}{pat.rest}: {FAIL}")
            else:
                out.append(f"{V}{pat.rest} = {var}.src[{k}:]")
                fn.bound.add(pat.rest)

    # ---------------------------------------------------------------- results
    def expr(self, e: Expr) -> str:
        self.helpers |= e.helpers
        self.exprs += 1
        return e.python

    def value(self, t: Any) -> str:
        """A term in a non-node position (:arg, :tag): its plain Python value."""
        if isinstance(t, TConst):
            return _literal(t.value)
        if isinstance(t, TExpr):
            return f"check_result(bounded_value({self.expr(t.expr)}))"
        raise TypeError(t)

    def dtype(self, d: DType | Expr) -> str:
        if isinstance(d, DType):
            return f"dtypes.{d.name}"
        return f"as_dtype({self.expr(d)})" if id(d) in self.plan.dtype_exprs else self.expr(d)

    def term(self, t: Any, fn: _Fn, fallback: str) -> str:
        """A Python expression for a node term; literals become CONSTs of dtype `fallback`."""
        if isinstance(t, TCapture):
            return f"as_node({V}{t.name}, {fallback})" if t.name in self.lets else V + t.name
        if isinstance(t, TConst):
            if id(t) in self.plan.literals:  # may not fit the dtype it gets: checked
                return f"UOp.const({fallback}, const_arg({fallback}, {_literal(t.value)}))"
            return f"UOp.const({fallback}, {_literal(t.value)})"
        if isinstance(t, TExpr):
            return f"as_node({self.expr(t.expr)}, {fallback})"
        if isinstance(t, TNode):
            srcs, first = self.children(t.children, fn, fallback, t.op)
            dt = self.dtype(t.dtype) if t.dtype is not None else self.inferred_dtype(t.op, srcs, first, fallback)
            arg = self.value(t.arg) if t.arg is not None else "None"
            if id(t) in self.plan.const_args:  # a CONST's arg: a number its dtype holds
                dt = fn.temp(dt)
                arg = f"const_arg({dt}, {arg})"
            tag = self.value(t.tag) if t.tag is not None else "None"
            return f"UOp(Ops.{t.op.name}, {dt}, {self.src_tuple(srcs)}, {arg}, {tag})"
        if isinstance(t, TReplace):
            base = V + t.base
            kw = []
            if t.children is not None:
                srcs, _ = self.children(t.children, fn, f"{base}.dtype", None)
                kw.append(f"src={self.src_tuple(srcs)}")
            new_dtype = f"{base}.dtype"
            if t.dtype is not None:
                new_dtype = self.dtype(t.dtype)
                if id(t) in self.plan.const_args:
                    new_dtype = fn.temp(new_dtype)
                kw.append(f"dtype={new_dtype}")
            if t.arg is not None:
                arg = self.value(t.arg)
                kw.append(f"arg={f'const_arg({new_dtype}, {arg})' if id(t) in self.plan.const_args else arg}")
            if t.tag is not None:
                kw.append(f"tag={self.value(t.tag)}")
            return f"{base}.replace({', '.join(kw)})" if kw else base
        raise TypeError(f"not a node term: {t!r}")

    def children(self, children: tuple, fn: _Fn, fallback: str, op: Ops | None) -> tuple[list, str | None]:
        """Emit children; literal children take the dtype of their first non-literal sibling."""
        built: list[tuple[str, str] | None] = [None] * len(children)
        sibling_dtype: str | None = None
        for i, c in enumerate(children):
            if isinstance(c, TConst) or (op is Ops.WHERE and i == 0):
                continue
            if isinstance(c, TSplice):
                seq = V + c.name if c.expr is None else fn.temp(f"tuple({self.expr(c.expr)})")
                built[i] = ("splice", seq)
                # the spliced sources may be empty at run time
                sibling_dtype = sibling_dtype or f"({seq}[0].dtype if {seq} else {fallback})"
                continue
            code = self.term(c, fn, fallback)
            if not isinstance(c, TCapture):
                code = fn.temp(code)
            built[i] = ("one", code)
            sibling_dtype = sibling_dtype or f"{code}.dtype"
        for i, c in enumerate(children):
            if built[i] is None:
                want = "dtypes.bool" if (op is Ops.WHERE and i == 0) else (sibling_dtype or fallback)
                built[i] = ("one", self.term(c, fn, want))
        first = built[0][1] if built and built[0][0] == "one" else None
        return built, first

    def inferred_dtype(self, op: Ops, srcs: list, first: str | None, fallback: str) -> str:
        how = OP_INFO[op].result_dtype
        if how in ("bool", "void", "index"):
            return f"dtypes.{how}"
        i = 1 if how == "src1" else 0
        if i < len(srcs) and srcs[i][0] == "one":
            return f"{srcs[i][1]}.dtype"
        return fallback

    @staticmethod
    def src_tuple(srcs: list) -> str:
        parts: list[str] = []
        run: list[str] = []
        for kind, code in srcs:
            if kind == "one":
                run.append(code)
            else:
                if run:
                    parts.append(f"({', '.join(run)},)")
                    run = []
                parts.append(code)
        if run or not parts:
            parts.append(f"({', '.join(run)}{',' if len(run) == 1 else ''})")
        return " + ".join(parts)


def emit_python(name: str, doc: str, rules: list[Rule]) -> str:
    return PythonEmitter(name, doc, rules).emit()
