"""Static checks over parsed rule files.

Errors: unknown includes and include cycles, duplicate names, wrong arity,
unbound names in guards and results, misuse of rest captures, and callbacks
that cannot be imported or whose parameters are not the bound names.
Warnings: rules shadowed by an earlier unguarded, more general rule, and
captures that are never used.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from pathlib import Path

from rulec.runtime.helpers import HELPERS
from rulec.runtime.ops import OP_INFO

from .diagnostics import Loc, Reporter
from .exprs import Expr, bind_names
from .model import NOARG, Pat, Rule, RuleFile, RuleSetDef, TCapture, TExpr, TNode, TReplace, TSplice, term_walk
from .variants import MAX_VARIANTS, pattern_variants, rule_can_refuse


def check(files: list[RuleFile], rep: Reporter) -> dict[str, RuleSetDef]:
    table: dict[str, RuleSetDef] = {}
    for f in files:
        for rs in f.rulesets:
            if rs.name in table:
                prev = table[rs.name]
                rep.error(rs.loc, f"rule set '{rs.name}' is already defined at {prev.loc}", len(rs.name))
                continue
            table[rs.name] = rs
    for rs in table.values():
        _check_includes(rs, table, rep)
        seen: dict[str, Loc] = {}
        for rule in rs.rules:
            if rule.name in seen:
                rep.error(rule.loc, f"duplicate rule name '{rule.name}' in rule set '{rs.name}' "
                                    f"(first defined at {seen[rule.name]})", len(rule.name))
            else:
                seen[rule.name] = rule.loc
            check_rule(rule, rep)
    for rs in table.values():
        if not _cyclic(rs, table):
            _check_shadowing(rs, table, rep)
    return table


def _cyclic(rs: RuleSetDef, table: dict[str, RuleSetDef], stack: tuple[str, ...] = ()) -> bool:
    if rs.name in stack:
        return True
    return any(_cyclic(table[n], table, stack + (rs.name,)) for n, _ in rs.include if n in table)


def _check_includes(rs: RuleSetDef, table: dict[str, RuleSetDef], rep: Reporter) -> None:
    for name, loc in rs.include:
        if name not in table:
            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            rep.error(loc, f"include of unknown rule set '{name}'{hint}", len(name))
        elif name == rs.name:
            rep.error(loc, f"include cycle: rule set '{name}' includes itself", len(name))
        else:
            path = _include_path(name, rs.name, table, set())
            if path is not None:
                rep.error(loc, f"include cycle: {' -> '.join([rs.name] + path)}", len(name))


def _include_path(start: str, goal: str, table: dict[str, RuleSetDef], seen: set[str]) -> list[str] | None:
    """The chain of includes from `start` to `goal`, both named, or None when there is none."""
    if start == goal:
        return [start]
    if start in seen or start not in table:
        return None
    seen.add(start)
    for name, _ in table[start].include:
        tail = _include_path(name, goal, table, seen)
        if tail is not None:
            return [start] + tail
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
    if rule.when is not None:
        _bind(rule.when, rule, rep, used)
    if rule.rewrite is not None:
        _check_term(rule, rep, used)
    if rule.call is not None:
        _check_call(rule, rep, used)
    # a name captured twice is an equality test, so it is used
    counts: dict[str, int] = {}
    for p in rule.match.walk():
        if p.name:
            counts[p.name] = counts.get(p.name, 0) + 1
    for name, loc in rule.capture_locs.items():
        if name not in used and counts.get(name, 0) < 2:
            rep.warning(loc, f"capture '{name}' is never used (write _ to match without capturing)", len(name))


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


def _bind(expr: Expr, rule: Rule, rep: Reporter, used: set[str]) -> None:
    bound = set(rule.captures)
    for name, off, kind in bind_names(expr, bound):
        loc = expr.loc_at(off, name)
        if kind == "call":
            close = difflib.get_close_matches(name, list(HELPERS), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see docs/rules.md for the registered helpers"
            rep.error(loc, f"unknown helper '{name}' ({hint})", len(name))
        elif kind == "shadowed":
            rep.error(loc, f"'{name}' is a capture of rule '{rule.name}', which hides the helper {name}(); "
                           f"rename the capture", len(name))
        else:
            rep.error(loc, _unbound(name, rule), len(name))
    used |= expr.names


def _unbound(name: str, rule: Rule) -> str:
    close = difflib.get_close_matches(name, list(rule.captures), n=1)
    hint = (f"did you mean '{close[0]}'?" if close else
            f"it binds {', '.join(sorted(rule.captures))}" if rule.captures else "it binds no names")
    return f"name '{name}' is not bound by the pattern of rule '{rule.name}' ({hint})"


def _check_term(rule: Rule, rep: Reporter, used: set[str]) -> None:
    for t in term_walk(rule.rewrite):
        if isinstance(t, TCapture):
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
    spec = rule.call
    assert spec is not None
    fn = import_callback(spec.module, spec.function, spec.loc, rep)
    if fn is None:
        used |= set(rule.captures)  # which captures it reads is unknown: do not also warn that they are unused
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        rep.error(spec.loc, f"cannot read the parameters of {spec.module}:{spec.function}")
        used |= set(rule.captures)
        return
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            rep.error(spec.loc, f"callback {spec.function} takes *args/**kwargs; name its parameters after the "
                                f"captures of rule '{rule.name}'")
            used |= set(rule.captures)
            return
        if p.kind is p.KEYWORD_ONLY:  # the generated matcher passes captures by position
            rep.error(spec.loc, f"callback {spec.function} takes keyword-only parameter '{p.name}'; rulec passes "
                                f"captures by position")
            used |= set(rule.captures)
            return
        if p.name == "ctx":
            spec.wants_ctx = True
        elif p.name not in rule.captures:
            bound = ", ".join(sorted(rule.captures)) or "nothing"
            rep.error(spec.loc, f"callback {spec.function} takes parameter '{p.name}', but rule '{rule.name}' "
                                f"binds {bound}")
            used |= set(rule.captures)
            return
        params.append(p.name)
    spec.params = tuple(params)
    used |= set(params)


def import_callback(module: str, function: str, loc: Loc, rep: Reporter):
    # rule files may name callbacks that live beside them
    extra = [str(Path(loc.file).resolve().parent)]
    added = [p for p in extra if p not in sys.path]
    sys.path[:0] = added
    try:
        mod = importlib.import_module(module)
    except (Exception, SystemExit) as e:  # an import error in user code must become a diagnostic
        rep.error(loc, f"cannot import callback module '{module}': {type(e).__name__}: {e}")
        return None
    finally:
        for p in added:
            sys.path.remove(p)
    fn = getattr(mod, function, None)
    if fn is None:
        names = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches(function, names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        rep.error(loc, f"module '{module}' has no function '{function}'{hint}")
        return None
    if not callable(fn):
        rep.error(loc, f"'{module}:{function}' is not a function (its type is {type(fn).__name__})")
        return None
    return fn


# ------------------------------------------------------------------ shadowing

def subsumes(a: Pat, b: Pat) -> bool:
    """True when `a` matches every node that `b` matches (ignoring guards)."""
    if a.ops is not None and (b.ops is None or not b.ops <= a.ops):
        return False
    if a.dtypes is not None and (b.dtypes is None or not b.dtypes <= a.dtypes):
        return False
    if a.arg is not NOARG and (b.arg is NOARG or a.arg != b.arg):
        return False
    if a.src is None:
        return True
    if b.src is None:
        return False
    if a.rest is None and (b.rest is not None or len(b.src) != len(a.src)):
        return False
    if len(b.src) < len(a.src):
        return False
    return all(subsumes(x, y) for x, y in zip(a.src, b.src))


def _has_repeated_names(p: Pat) -> bool:
    names = [q.name for q in p.walk() if q.name]
    return len(names) != len(set(names))


def _check_shadowing(rs: RuleSetDef, table: dict[str, RuleSetDef], rep: Reporter) -> None:
    rules = rs.all_rules(table)
    own = set(map(id, rs.rules))
    for j, later in enumerate(rules):
        if id(later) not in own:
            continue  # reported where it is defined
        for earlier in rules[:j]:
            if earlier.when is not None or earlier.call is not None or _has_repeated_names(earlier.match):
                continue
            if any(subsumes(v, later.match) for v in pattern_variants(earlier.match)):
                where = "" if id(earlier) in own else f" (included from rule set '{earlier.ruleset}')"
                rep.warning(later.loc, f"rule '{later.name}' can never fire: rule '{earlier.name}' at "
                                       f"{earlier.loc}{where} matches everything it matches and has no guard",
                            len(later.name))
                break
