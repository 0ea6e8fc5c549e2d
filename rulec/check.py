"""Static checks over parsed rule files.

Errors: unknown includes and include cycles, duplicate names, wrong arity,
unbound names in guards and results, misuse of rest captures, and callbacks
that are not declared, not defined in their module, or whose parameters are
not the bound names (read from the module's source: nothing is imported).
Warnings: rules shadowed by an earlier unguarded, more general rule, and
captures that are never used.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import keyword

from rulec.runtime.engine.helpers import NAMESPACES
from rulec.runtime.ir.ops import OP_INFO

from .callback_check import CallbackScope, find_definition
from .diagnostics import Loc, Reporter
from .exprs import HELPERS, NOT_CONSTANT, Expr, bind_names, constant_value
from .model import Pat, Rule, RuleFile, RuleSetDef, TCapture, TExpr, TIf, TNode, TReplace, TSplice, term_walk
from .typecheck import check_rule_types
from .shadowing import check_shadowing
from .variants import MAX_VARIANTS, pattern_variants, rule_can_refuse


# Each rule set becomes two artifacts, and its egglog program is validated by running it (~40 ms): a file
# of thousands of tiny rule sets would take minutes to build. The shipped rules have 20.
MAX_RULESETS = 256
# Rules generated in one build, counting a rule once per rule set that includes it: a large set included by
# many others is compiled again for each (some 2,000 rules a second)
MAX_GENERATED_RULES = 25_000


def check(files: list[RuleFile], rep: Reporter) -> dict[str, RuleSetDef]:
    table: dict[str, RuleSetDef] = {}
    for f in files:
        for rs in f.rulesets:
            if rs.name in table:
                prev = table[rs.name]
                rep.error(rs.loc, f"rule set '{rs.name}' is already defined at {prev.loc}", len(rs.name))
                continue
            table[rs.name] = rs
    acyclic: set[str] = set()
    cyclic = {name for name, rs in table.items() if _cyclic(rs, table, acyclic)}
    for rs in table.values():
        _check_includes(rs, table, rep, rs.name in cyclic)
        seen: dict[str, Loc] = {}
        for rule in rs.rules:
            if rule.name in seen:
                rep.error(rule.loc, f"duplicate rule name '{rule.name}' in rule set '{rs.name}' "
                                    f"(first defined at {seen[rule.name]})", len(rule.name))
            else:
                seen[rule.name] = rule.loc
            check_rule(rule, rep)
    filed: dict = {}  # each rule's variants, filed once for all the rule sets that include it
    for rs in table.values():
        if rs.name not in cyclic:
            check_shadowing(rs, table, rep, filed)  # rulec/shadowing.py
    return table


def check_build_size(table: dict[str, RuleSetDef], rep: Reporter) -> None:
    """What a build would generate is bounded (checking is near-linear, so `rulec check` has no such limit)."""
    total = 0
    for i, rs in enumerate(table.values()):
        if i == MAX_RULESETS:
            rep.error(rs.loc, f"too many rule sets: at most {MAX_RULESETS} in one build (each is compiled "
                              f"and validated on its own); split the files into several builds", len(rs.name))
            return
        total += len(rs.all_rules(table))
        if total > MAX_GENERATED_RULES:
            rep.error(rs.loc, f"too many rules to generate: with its includes, rule set '{rs.name}' brings "
                              f"the build past {MAX_GENERATED_RULES} rules (a rule counts once per rule set "
                              f"that includes it)", len(rs.name))
            return


def _cyclic(rs: RuleSetDef, table: dict[str, RuleSetDef], acyclic: set[str] | None = None) -> bool:
    """Whether an include cycle is reachable from `rs` (a depth-first walk with an explicit stack: include
    chains may be as long as a file likes). `acyclic` collects, across calls, the sets known to reach none."""
    acyclic = set() if acyclic is None else acyclic
    on_path = {rs.name}
    stack = [(rs.name, iter(rs.include))]
    while stack:
        name, includes = stack[-1]
        for inc, _ in includes:
            if inc in on_path:
                return True
            if inc in table and inc not in acyclic:
                on_path.add(inc)
                stack.append((inc, iter(table[inc].include)))
                break
        else:
            stack.pop()
            on_path.discard(name)
            acyclic.add(name)  # finished without meeting the path: reaches no cycle
    return False


def _check_includes(rs: RuleSetDef, table: dict[str, RuleSetDef], rep: Reporter, reaches_cycle: bool) -> None:
    """Unknown and cyclic includes; the path of a cycle is looked for only from a set that reaches one
    (a search per include edge would be quadratic in a file of many sets that include many others)."""
    for name, loc in rs.include:
        if name not in table:
            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            rep.error(loc, f"include of unknown rule set '{name}'{hint}", len(name))
        elif name == rs.name:
            rep.error(loc, f"include cycle: rule set '{name}' includes itself", len(name))
        elif reaches_cycle:
            path = _include_path(name, rs.name, table, set())
            if path is not None:
                rep.error(loc, f"include cycle: {' -> '.join([rs.name] + path)}", len(name))


def _include_path(start: str, goal: str, table: dict[str, RuleSetDef], seen: set[str]) -> list[str] | None:
    """The chain of includes from `start` to `goal`, both named, or None when there is none (the first one
    in include order, found depth-first with an explicit stack)."""
    if start == goal:
        return [start]
    if start in seen or start not in table:
        return None
    seen.add(start)
    path, stack = [start], [iter(table[start].include)]
    while stack:
        for name, _ in stack[-1]:
            if name == goal:
                return path + [name]
            if name not in seen and name in table:
                seen.add(name)
                path.append(name)
                stack.append(iter(table[name].include))
                break
        else:
            stack.pop()
            path.pop()
    return None


# ------------------------------------------------------------------ one rule

def collect_captures(rule: Rule, rep: Reporter) -> None:
    for p in rule.match.walk():
        if p.name is not None:
            _add_capture(rule, p.name, "node", p.loc, rep)
        if p.rest:
            _add_capture(rule, p.rest, "rest", p.rest_loc or p.loc, rep)


def _add_capture(rule: Rule, name: str, kind: str, loc: Loc, rep: Reporter) -> None:
    if name == "ctx":
        rep.error(loc, "'ctx' is reserved for the callback context", 3)
        return
    prev = rule.captures.get(name)
    if prev is None:
        rule.captures[name] = kind
        rule.capture_locs[name] = loc
    elif prev != kind or kind == "rest":
        rep.error(loc, f"'{name}' is captured twice with different meanings", len(name))


def check_rule(rule: Rule, rep: Reporter) -> None:
    collect_captures(rule, rep)
    for p in rule.match.walk():
        _check_pattern_arity(p, rep)
    if len(pattern_variants(rule.match, rule_can_refuse(rule), MAX_VARIANTS + 1)) > MAX_VARIANTS:
        # the generated matcher tries only the first orderings: the others would never match
        rep.warning(rule.loc, f"rule '{rule.name}' has more than {MAX_VARIANTS} orderings of its commutative "
                              f"sources; only {MAX_VARIANTS} are matched (split it into smaller rules)",
                    len(rule.name))
    used: set[str] = set()
    _check_lets(rule, rep, used)
    if rule.when is not None:
        _bind(rule.when, rule, rep, used)
        value = constant_value(rule.when)
        if value is not NOT_CONSTANT and not value:
            rep.warning(rule.when.loc, f"the guard of rule '{rule.name}' is always false: the rule never fires",
                        len(rule.when.text.split("\n")[0]))
    if rule.rewrite is not None:
        _check_term(rule, rep, used)
    if rule.call is not None:
        _check_call(rule, rep, used)
    if rule.fact is not None:
        for e in rule.fact.exprs():
            _bind(e, rule, rep, used)
    check_rule_types(rule, rep)
    # a name captured twice is an equality test, so it is used
    counts: dict[str, int] = {}
    for p in rule.match.walk():
        if p.name:
            counts[p.name] = counts.get(p.name, 0) + 1
    for name, loc in rule.capture_locs.items():
        if name not in used and counts.get(name, 0) < 2:
            rep.warning(loc, f"capture '{name}' is never used (write _ to match without capturing)", len(name))
    for b in rule.lets:
        if b.name not in used:
            rep.warning(b.loc, f"let '{b.name}' is never used", len(b.name))


def _check_lets(rule: Rule, rep: Reporter, used: set[str]) -> None:
    """Each let name is new (not a capture, helper, namespace, keyword or earlier let); each expression reads
    captures and earlier lets only. A let that is refused is dropped, so later uses report it as unbound."""
    kept = []
    for b in rule.lets:
        problem = None
        if not b.name.isidentifier() or not b.name[:1].islower() and b.name[:1] != "_":
            problem = f"invalid let name '{b.name}': use a lowercase identifier"
        elif keyword.iskeyword(b.name) or b.name in NAMESPACES or b.name == "ctx":
            problem = f"'{b.name}' cannot be a let name: it is reserved"
        elif b.name in rule.captures:
            problem = f"let '{b.name}' has the name of a capture of rule '{rule.name}'"
        elif b.name in HELPERS:
            problem = f"let '{b.name}' would hide the helper {b.name}()"
        elif any(k.name == b.name for k in kept):
            problem = f"let '{b.name}' is bound twice"
        if problem:
            rep.error(b.loc, problem, len(b.name))
            continue
        errors = len(rep.errors)
        _bind(b.expr, rule, rep, used, {k.name for k in kept})
        if len(rep.errors) == errors:  # a let that reads a later or unknown name is dropped: no cycles
            kept.append(b)
    rule.lets = kept


def _check_pattern_arity(p: Pat, rep: Reporter) -> None:
    if p.ops is None or p.src is None:
        return
    arities = {OP_INFO[op].arity for op in p.ops}
    if None in arities:
        return
    n = len(p.src)
    if any(n == a or (p.rest is not None and n < a) for a in arities):
        return
    gives = f"but the pattern gives {n}{' or more' if p.rest is not None else ''}"
    if len(arities) == 1:
        (arity,) = arities
        rep.error(p.loc, f"{p.ops_text} takes {arity} source{'s' if arity != 1 else ''}, {gives}", 1)
    else:  # an op set: no op in it can match
        takes = ", ".join(map(str, sorted(arities)))
        rep.error(p.loc, f"the ops of {p.ops_text} take {takes} sources, {gives}", 1)


def _bind(expr: Expr, rule: Rule, rep: Reporter, used: set[str], lets: set[str] | None = None) -> None:
    """Resolve `expr`'s names against the captures and the let names (all of them, unless `lets` says which)."""
    bound = set(rule.captures) | (rule.let_names if lets is None else lets)
    for name, off, kind in bind_names(expr, bound):
        loc = expr.loc_at(off, name)
        if kind == "call":
            close = difflib.get_close_matches(name, list(HELPERS), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see docs/rules.md for the registered helpers"
            rep.error(loc, f"unknown helper '{name}' ({hint})", len(name))
        elif kind == "shadowed":
            rep.error(loc, f"'{name}' is a capture of rule '{rule.name}', which hides the helper {name}(); "
                           f"rename the capture", len(name))
        elif name in rule.let_names:  # bound, but by a later let
            rep.error(loc, f"let '{name}' is bound after this: a let reads the captures and the lets before it",
                      len(name))
        else:
            rep.error(loc, _unbound(name, rule), len(name))
    used |= expr.names


def _unbound(name: str, rule: Rule) -> str:
    names = list(rule.captures) + sorted(rule.let_names)
    close = difflib.get_close_matches(name, names, n=1)
    hint = (f"did you mean '{close[0]}'?" if close else
            f"it binds {', '.join(sorted(names))}" if names else "it binds no names")
    return f"name '{name}' is not bound by the pattern of rule '{rule.name}' ({hint})"


def _check_term(rule: Rule, rep: Reporter, used: set[str]) -> None:
    decisions: set[int] = set()  # the `if`s that are the result or a branch of one: the only places for them
    t = rule.rewrite
    stack = [t]
    while stack:
        t = stack.pop()
        if isinstance(t, TIf):
            decisions.add(id(t))
            stack += [t.then, t.orelse]
    for t in term_walk(rule.rewrite):
        if isinstance(t, TIf) and id(t) not in decisions:
            rep.error(t.loc, "(if ...) chooses the whole result (or a branch of another if); inside a node, "
                             "compute the value with {a if c else b}", 3)
        if isinstance(t, TCapture) and t.name in rule.let_names:
            used.add(t.name)  # a let's value as the result: a node, or a number that becomes a CONST
        elif isinstance(t, TCapture):
            kind = rule.captures.get(t.name)
            if kind is None:
                rep.error(t.loc, _unbound(t.name, rule), len(t.name))
            elif kind == "rest":
                rep.error(t.loc, f"'{t.name}' captures several sources: splice it with ...{t.name}", len(t.name))
            used.add(t.name)
        elif isinstance(t, TSplice):
            if t.expr is not None:
                continue  # its expression is checked as the TExpr term_walk yields next
            if rule.captures.get(t.name) != "rest":
                rep.error(t.loc, f"'...{t.name}' needs a rest capture '...{t.name}' in the pattern",
                          len(t.name) + 3)
            used.add(t.name)
        elif isinstance(t, TExpr):
            _bind(t.expr, rule, rep, used)
        elif isinstance(t, TReplace):
            if rule.captures.get(t.base) != "node":
                rep.error(t.loc, f"replace needs a node captured by the pattern, '{t.base}' is not one",
                          len(t.base))
            used.add(t.base)
        elif isinstance(t, TNode):
            arity = OP_INFO[t.op].arity
            if arity is not None and not any(isinstance(c, TSplice) for c in t.children) \
                    and len(t.children) != arity:
                rep.error(t.loc, f"{t.op.name} takes {arity} source{'s' if arity != 1 else ''}, "
                                 f"but the result gives {len(t.children)}")
        # a computed :dtype is checked as the TExpr that term_walk yields for it


def _check_call(rule: Rule, rep: Reporter, used: set[str]) -> None:
    """The callback must be a def in a declared module (or one beside the file), its parameters bound names.

    Read from the module's source: checking runs none of its code (see callback_check).
    """
    spec = rule.call
    assert spec is not None
    scope = spec.scope or CallbackScope(str(Path(rule.file or spec.loc.file).resolve().parent))
    fn = find_definition(spec.module, spec.function, scope, spec.loc, rep)
    if fn is None or fn.kind != "function":
        if fn is not None:
            rep.error(spec.loc, f"'{spec.module}:{spec.function}' is a class; a callback is a function")
        # which captures it reads is unknown: do not also warn that they are unused
        used |= set(rule.captures) | rule.let_names
        return
    sigs = scope.signatures.get(spec.module)
    if sigs is not None and spec.function not in sigs:
        known = ", ".join(sorted(sigs)) or "none"
        rep.error(spec.loc, f"callback '{spec.function}' is not declared under '{spec.module}' in `callbacks:` "
                            f"(declared: {known})")
        used |= set(rule.captures) | rule.let_names
        return
    if fn.star:
        rep.error(spec.loc, f"callback {spec.function} takes *args/**kwargs; name its parameters after the "
                            f"captures of rule '{rule.name}'")
        used |= set(rule.captures) | rule.let_names
        return
    if fn.keyword_only:  # the generated matcher passes captures by position
        rep.error(spec.loc, f"callback {spec.function} takes keyword-only parameter '{fn.keyword_only[0]}'; rulec "
                            f"passes captures by position")
        used |= set(rule.captures) | rule.let_names
        return
    for name in fn.positional:
        if name == "ctx":
            spec.wants_ctx = True
        elif name not in rule.captures and name not in rule.let_names:
            bound = ", ".join(sorted(set(rule.captures) | rule.let_names)) or "nothing"
            rep.error(spec.loc, f"callback {spec.function} takes parameter '{name}', but rule '{rule.name}' "
                                f"binds {bound}")
            used |= set(rule.captures) | rule.let_names
            return
    spec.params = fn.positional
    used |= set(fn.positional)
    if sigs is not None:
        _check_signature(rule, sigs, fn.positional, scope, rep)


_BINDING_KINDS = {"node": "a node capture", "nodes": "a rest capture (...name)", "value": "a capture or a let"}


def _check_signature(rule: Rule, sigs: dict, positional: tuple[str, ...], scope: CallbackScope,
                     rep: Reporter) -> None:
    """A `call:` of a module with typed declarations: the function is declared, its def takes as many
    parameters as declared (`ctx` where the kind is context), and the rule binds each to a name of its kind."""
    spec = rule.call
    sig = sigs[spec.function]
    problem = None
    if len(sig.params) != len(positional):
        problem = (f"callback {spec.function} is declared with {len(sig.params)} parameter(s) but its def takes "
                   f"{len(positional)} ({', '.join(positional)})")
    else:
        for name, kind in zip(positional, sig.params):
            if (kind == "context") != (name == "ctx"):
                problem = (f"callback {spec.function}: the stage context is the parameter `ctx`, and only it has "
                           f"kind context (parameter '{name}' is declared {kind})")
                break
    if problem:
        if id(sig) not in scope.checked:  # once per declaration, not once per use
            scope.checked.add(id(sig))
            rep.error(sig.loc, problem, len(sig.function))
        return
    spec.result = sig.result
    for name, kind in zip(positional, sig.params):
        have = rule.captures.get(name) or ("let" if name in rule.let_names else None)
        ok = {"context": True, "node": have == "node", "nodes": have == "rest", "value": have is not None}[kind]
        if not ok:
            what = {"node": "a node capture", "rest": "a rest capture", "let": "a let value"}.get(have, "nothing")
            rep.error(spec.loc, f"callback {spec.function} takes '{name}' as {_BINDING_KINDS[kind]}, but rule "
                                f"'{rule.name}' binds it to {what}")
