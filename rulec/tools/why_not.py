"""Why a rule does not apply to a node: its pattern interpreted against the node, failure by failure, and
its guard evaluated part by part with the values it read.

The pattern is the checked one the compiler built from the rule file (rulec/model.py `Pat`), with every
commutative variant (rulec/variants.py), so the answer is about the rule as written and compiled, with no
annotation from its author. The guard and `let:` bindings run as the generated matcher runs them: their
Python translation, evaluated in the namespace of the rule set's generated module.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from rulec.exprs import CAPTURE_PREFIX, python_source
from rulec.model import NOARG, Pat, Rule
from rulec.variants import pattern_variants

MAX_VALUES = 8  # sub-expression values shown for a false guard


@dataclass
class PatternFailure:
    depth: int  # how far below the root the failure is: deeper means more of the pattern matched
    message: str


@dataclass
class Explanation:
    matched: bool  # the pattern matched (some variant)
    failure: PatternFailure | None = None  # when it did not: the deepest failure over the variants
    guard_false: str | None = None  # the part of `when:` that was false
    guard_values: list[tuple[str, str]] = field(default_factory=list)  # (sub-expression, value) it read
    guard_error: str | None = None  # the guard could not be evaluated here (and why)
    bindings: dict[str, Any] = field(default_factory=dict)
    orders: int = 1  # operand orders (commutative variants) in which the pattern matched and the guard did not

    def lines(self, rule: Rule) -> list[str]:
        if not self.matched:
            assert self.failure is not None
            return [f"the pattern does not match: {self.failure.message}"]
        if self.guard_error is not None:
            return ["the pattern matches", f"the guard could not be evaluated here: {self.guard_error}"]
        if self.guard_false is not None:
            orders = f" (in each of the {self.orders} operand orders it allows; the first is shown)" \
                if self.orders > 1 else ""
            out = ["the pattern matches" + orders, f"the guard is false: `{self.guard_false}`"]
            out += [f"    {text} = {value}" for text, value in self.guard_values]
            return out
        if rule.call is not None:
            return ["the pattern matches" + (" and the guard holds" if rule.when is not None else ""),
                    f"the rule calls {rule.call.module}:{rule.call.function}, which decides at run time (with the "
                    f"stage's context) whether to rewrite"]
        return ["the pattern matches" + (" and the guard holds" if rule.when is not None else "")
                + ": the rule applies to this node"]


def explain_rule(rule: Rule, node: Any, namespace: dict[str, Any], show: Any = repr) -> Explanation:
    """Why `rule` does (not) apply at the root of `node`; `namespace` is the generated module's globals."""
    best: PatternFailure | None = None
    refused: list[Explanation] = []  # variants whose pattern matched and whose guard did not hold
    for variant in pattern_variants(rule.match):
        bound: dict[str, Any] = {}
        failure = _match(variant, node, bound, "the node", 0, show)
        if failure is None:
            why = _explain_guard(rule, bound, namespace, show)
            if why.guard_false is None and why.guard_error is None:
                return why  # this operand order applies
            refused.append(why)
        elif best is None or failure.depth > best.depth:
            best = failure
    if refused:
        first = refused[0]
        first.orders = len(refused)
        return first
    return Explanation(False, best)


# ------------------------------------------------------------------ the pattern

def _match(p: Pat, n: Any, bound: dict[str, Any], where: str, depth: int, show: Any) -> PatternFailure | None:
    if p.ops is not None and n.op not in p.ops:
        expected = p.ops_text or " | ".join(sorted(o.name for o in p.ops))
        return PatternFailure(depth, f"{where}: expected {expected}, got {n.op.name}")
    if p.dtypes is not None and n.dtype not in p.dtypes:
        names = ", ".join(sorted(str(d) for d in p.dtypes))
        return PatternFailure(depth, f"{where}: expected dtype {names}, got {n.dtype}")
    if p.arg is not NOARG and not (n.arg is p.arg if isinstance(p.arg, bool) or p.arg is None else n.arg == p.arg):
        return PatternFailure(depth, f"{where}: expected arg {p.arg!r}, got {n.arg!r}")
    if p.name is not None:
        if p.name in bound and bound[p.name] is not n:
            return PatternFailure(depth, f"{where}: `{p.name}` appears twice in the pattern, and here it is "
                                         f"{show(n)}, not the {show(bound[p.name])} matched first")
        bound[p.name] = n
    if p.src is None:
        return None
    k = len(p.src)
    if p.rest is None and len(n.src) != k:
        return PatternFailure(depth, f"{where}: expected {k} source{'s' * (k != 1)}, got {len(n.src)}")
    if p.rest is not None and len(n.src) < k:
        return PatternFailure(depth, f"{where}: expected at least {k} sources, got {len(n.src)}")
    for i, (child, s) in enumerate(zip(p.src, n.src)):
        label = f"source {i}" if where == "the node" else f"{where}, source {i}"
        failure = _match(child, s, bound, label, depth + 1, show)
        if failure is not None:
            return failure
    if p.rest:
        rest = tuple(n.src[k:])
        if p.rest in bound and bound[p.rest] != rest:
            return PatternFailure(depth, f"{where}: the sources after the first {k} differ from `{p.rest}`")
        bound[p.rest] = rest
    return None


# ------------------------------------------------------------------ the guard

def _explain_guard(rule: Rule, bound: dict[str, Any], namespace: dict[str, Any], show: Any) -> Explanation:
    env = {CAPTURE_PREFIX + name: value for name, value in bound.items()}
    env["ctx"] = None
    try:
        for let in rule.lets:
            env[CAPTURE_PREFIX + let.name] = eval(let.expr.python, namespace, env)  # noqa: S307 - checked rule code
    except Exception as e:  # a let that reads the stage context, or raises here
        return Explanation(True, guard_error=f"`let: {rule.lets[0].name}` raised {type(e).__name__}: {e}",
                           bindings=bound)
    if rule.when is None or rule.when.resolved is None:
        return Explanation(True, bindings=bound)
    original, resolved = rule.when.tree.body, rule.when.resolved.body
    parts = list(zip(original.values, resolved.values)) if isinstance(original, ast.BoolOp) and \
        isinstance(original.op, ast.And) else [(original, resolved)]
    for text_part, code_part in parts:
        try:
            value = _eval(code_part, namespace, env)
        except Exception as e:
            return Explanation(True, guard_error=f"`{ast.unparse(text_part)}` raised {type(e).__name__}: {e}"
                               + (" (it reads the stage context, which is not kept after the run)"
                                  if "ctx" in ast.unparse(text_part) else ""), bindings=bound)
        if not value:
            return Explanation(True, guard_false=ast.unparse(text_part),
                               guard_values=_values(text_part, code_part, namespace, env, show), bindings=bound)
    return Explanation(True, bindings=bound)


def _eval(node: ast.AST, namespace: dict[str, Any], env: dict[str, Any]) -> Any:
    code = python_source(ast.Expression(body=node))
    return eval(code, namespace, env)  # noqa: S307 - the rule file's checked guard, as the matcher runs it


def _values(text_tree: ast.AST, code_tree: ast.AST, namespace: dict[str, Any], env: dict[str, Any],
            show: Any) -> list[tuple[str, str]]:
    """The values of the names, attributes and calls inside a false guard part, in source order."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for t, c in zip(ast.walk(text_tree), ast.walk(code_tree)):
        if not isinstance(t, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.BinOp)):
            continue
        text = ast.unparse(t)
        if text in seen or text in ("Ops", "dtypes", "GroupOp") or isinstance(getattr(t, "ctx", None), ast.Store):
            continue
        seen.add(text)
        try:
            value = _eval(c, namespace, env)
        except Exception as e:
            out.append((text, f"<raised {type(e).__name__}>"))
            continue
        if callable(value) and not hasattr(value, "op"):
            continue  # a helper or method itself, not a value
        out.append((text, show(value) if hasattr(value, "op") else repr(value)))
        if len(out) >= MAX_VALUES:
            break
    out.sort(key=lambda kv: len(kv[0]))
    return out
