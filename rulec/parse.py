"""Rule files (YAML) to the compiler model, with a position for everything.

A rule file maps rule-set names to rule sets:

    my_rules:
      doc: what these rules do
      include: [other_set]        # optional: its rules come first
      rules:
        - name: add-zero
          match: (ADD x 0)
          when: x.dtype == dtypes.index   # optional
          rewrite: x                      # or  call: package.module:function

    callbacks: [package.module]   # optional: modules `call:` may name (besides those beside the file)
"""
from __future__ import annotations

import difflib
import keyword
import re
from pathlib import Path

from .callback_check import CallbackScope, check_declarations, parse_signature
from .diagnostics import Loc, Reporter
from .model import CallSpec, FactSpec, Let, Rule, RuleFile, RuleSetDef
from .patterns import PatternError, PatternParser
from .sexpr import SexprError, read_sexpr
from .source import YNode, load_yaml

RULESET_KEYS = ("doc", "include", "rules")
CALLBACKS_KEY = "callbacks"  # top level: the modules a file's callbacks come from, not a rule set
# rule-set names become file and module names in the build folder, and `path:name` in rulec.load
RULESET_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
# rule names become parts of Python function names and egglog rule names, and appear in traces:
# ASCII letters, digits, '_', '-' and '.', so that every generator can write them as they are
RULE_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z", re.ASCII)
RULE_KEYS = ("name", "doc", "enabled", "match", "let", "when", "rewrite", "call", "fact")
FACT_KEYS = ("key", "keys", "value")
# a `match` or `rewrite` text: 30x the longest shipped one. Every atom gets its file position, and locating
# one in a quoted scalar costs time in proportion to the text, so thousands of atoms would take minutes
MAX_SEXPR_CHARS = 4096


def _unknown_key(rep: Reporter, node: YNode, key: str, allowed: tuple[str, ...], what: str) -> None:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of: {', '.join(allowed)})"
    rep.error(node.key_locs[key], f"unknown {what} key '{key}'{hint}", len(key))


def parse_file(path: str, text: str, rep: Reporter) -> RuleFile:
    out = RuleFile(path)
    root = load_yaml(path, text)
    if root is None:
        return out
    if not isinstance(root.value, dict):
        rep.error(root.loc, "a rule file maps rule-set names to rule sets")
        return out
    out.callbacks = parse_callbacks_key(root, path, rep)
    for name, node in root.value.items():
        if name == CALLBACKS_KEY:
            continue
        rs = _parse_ruleset(path, name, root.key_locs[name], node, rep)
        if rs is not None:
            out.rulesets.append(rs)
    for rs in out.rulesets:
        for rule in rs.rules:
            if rule.call is not None:
                rule.call.scope = out.callbacks
    return out


def parse_callbacks_key(root: YNode, path: str, rep: Reporter) -> CallbackScope:
    """The top-level `callbacks:`: the modules this file's `call:`s may name.

    Either a list of modules, or a mapping from each module to the typed declarations of the functions
    called from it (`- name(ctx, x: node) -> node?`). Modules beside the file need no declaration; the
    folder is kept for that.
    """
    scope = CallbackScope(str(Path(path).resolve().parent))
    node = root.get(CALLBACKS_KEY)
    if node is None:
        return scope
    if isinstance(node.value, dict):
        for name, decls in node.value.items():
            if _declare_module(scope, name, node.key_locs[name], rep):
                _parse_signatures(scope, name, decls, rep)
        check_declarations(scope, rep)
        return scope
    items = node.value if isinstance(node.value, list) else [node]
    for it in items:
        _declare_module(scope, it.value, it.loc, rep, it)
    check_declarations(scope, rep)
    return scope


def _declare_module(scope: CallbackScope, name, loc: Loc, rep: Reporter, node: YNode | None = None) -> bool:
    if not isinstance(name, str) or not _dotted_name(name):
        shown = _shown(node) if node is not None else repr(name)
        rep.error(loc, f"`{CALLBACKS_KEY}` lists module names (package.module), not {shown}")
        return False
    if name in scope.declared:
        rep.warning(loc, f"module '{name}' is declared twice", len(name))
        return False
    scope.declared[name] = loc
    return True


def _parse_signatures(scope: CallbackScope, module: str, decls: YNode, rep: Reporter) -> None:
    """`module: [function(param: kind, ...) -> result, ...]`: the typed declarations of one module."""
    items = decls.value if isinstance(decls.value, list) else [decls]
    table = scope.signatures.setdefault(module, {})
    for it in items:
        if not isinstance(it.value, str):
            rep.error(it.loc, f"module '{module}' maps to callback declarations: function(param: kind, ...) -> "
                              f"result, not {_shown(it)}")
            continue
        sig = parse_signature(it.value, it.loc)
        if isinstance(sig, str):
            rep.error(it.loc, f"{sig}: {it.value!r}", max(1, len(it.value)))
        elif sig.function in table:
            rep.error(it.loc, f"callback '{sig.function}' is declared twice", len(sig.function))
        else:
            table[sig.function] = sig


def _shown(node: YNode) -> str:
    return f"a {type(node.value).__name__}" if isinstance(node.value, (dict, list)) else repr(node.raw or node.value)


def _parse_ruleset(path: str, name: str, loc: Loc, node: YNode, rep: Reporter) -> RuleSetDef | None:
    if not RULESET_NAME_RE.match(name):
        rep.error(loc, f"invalid rule-set name '{name}': use letters, digits, '_' and '-'", len(name))
        return None
    if not isinstance(node.value, dict):
        rep.error(node.loc, f"rule set '{name}' must be a mapping with doc, include and rules")
        return None
    rs = RuleSetDef(name, loc, path)
    for key in node.value:
        if key not in RULESET_KEYS:
            _unknown_key(rep, node, key, RULESET_KEYS, "rule-set")
    doc = node.get("doc")
    if doc is not None:
        if not isinstance(doc.value, str):
            rep.error(doc.loc, "doc must be text")
        else:
            rs.doc = doc.value.strip()
    inc = node.get("include")
    if inc is not None:
        items = inc.value if isinstance(inc.value, list) else [inc]
        for it in items:
            if not isinstance(it.value, str):
                rep.error(it.loc, "include takes rule-set names")
            else:
                rs.include.append((it.value, it.loc))
    rules = node.get("rules")
    if rules is None:
        if not rs.include:
            rep.error(loc, f"rule set '{name}' has no rules and includes nothing", len(name))
        return rs
    if not isinstance(rules.value, list):
        rep.error(rules.loc, "rules must be a list")
        return rs
    for r in rules.value:
        rule = _parse_rule(path, name, r, rep)
        if rule is not None:
            rs.rules.append(rule)
    return rs


def _text(node: YNode, what: str, rep: Reporter) -> str | None:
    v = node.value
    if v is None:  # `when:` or `match: ~` left empty, not the Python constant None
        rep.error(node.loc, f"`{what}:` has no value")
        return None
    if isinstance(v, bool):
        v = str(v)
    if isinstance(v, (int, float)):
        v = repr(v)
    if not isinstance(v, str):
        rep.error(node.loc, f"{what} must be text")
        return None
    return v


def _name_text(node: YNode) -> str | None:
    """A name as written: YAML reads `name: true` or `name: 1` as a bool or a number."""
    v = node.value
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, int, float)) and not node.style and node.raw:
        return node.raw
    return None


def _parse_rule(path: str, ruleset: str, node: YNode, rep: Reporter) -> Rule | None:
    if not isinstance(node.value, dict):
        rep.error(node.loc, "a rule is a mapping with name, match and rewrite or call")
        return None
    unknown = [key for key in node.value if key not in RULE_KEYS]
    for key in unknown:
        _unknown_key(rep, node, key, RULE_KEYS, "rule")
    name_node = node.get("name")
    if name_node is None:
        rep.error(node.loc, "rule has no name")
        return None
    name = _name_text(name_node)
    if name is None:
        rep.error(name_node.loc, "a rule name must be text")
        return None
    if not RULE_NAME_RE.match(name):
        rep.error(name_node.loc, f"invalid rule name {name!r}: use ASCII letters, digits, '_', '-' and '.'",
                  max(1, len(name_node.raw.split("\n")[0])))
        return None
    match_node = node.get("match")
    if match_node is None:
        if not unknown:  # a misspelled `match` key is reported already
            rep.error(name_node.loc, f"rule '{name}' has no match", len(name))
        return None
    has_rw, has_call = node.get("rewrite") is not None, node.get("call") is not None
    has_fact = node.get("fact") is not None
    if has_rw + has_call + has_fact != 1:
        if has_rw or has_call or has_fact or not unknown:  # a misspelled `rewrite` or `call` is reported already
            given = [k for k, has in (("rewrite", has_rw), ("call", has_call), ("fact", has_fact)) if has]
            what = "neither rewrite nor call" if not given else f"both {' and '.join(given)}" if len(given) == 2 \
                else "rewrite, call and fact"
            rep.error(name_node.loc, f"rule '{name}' has {what}: give exactly one", len(name))
        return None
    parser = None

    def reader(n: YNode) -> PatternParser:
        return PatternParser(lambda off, tok: n.loc_at(off, tok))

    try:
        mtext = _text(match_node, "match", rep)
        if mtext is None:
            return None
        parser = reader(match_node)
        pat = parser.pattern(_read(mtext, match_node))
        rule = Rule(name, name_node.loc, pat, ruleset=ruleset, file=path)
        enabled = node.get("enabled")
        if enabled is not None:
            if not isinstance(enabled.value, bool):
                rep.error(enabled.loc, f"`enabled:` takes true or false, not {_shown(enabled)}")
            else:
                rule.enabled = enabled.value
        let = node.get("let")
        if let is not None:
            rule.lets = _parse_lets(let, reader, rep)
        when = node.get("when")
        if when is not None:
            wtext = _text(when, "when", rep)
            if wtext is None:
                return None
            rule.when = reader(when).expr(wtext, 0)
        if has_fact:
            rule.fact = _parse_fact(node.get("fact"), reader, rep)
            if rule.fact is None:
                return None
        elif has_rw:
            rw = node.get("rewrite")
            rtext = _text(rw, "rewrite", rep)
            if rtext is None:
                return None
            rule.rewrite = reader(rw).term(_read(rtext, rw))
        else:
            cn = node.get("call")
            ctext = _text(cn, "call", rep)
            if ctext is None:
                return None
            module, sep, func = ctext.strip().partition(":")
            if not sep or not _dotted_name(module) or not func.isidentifier() or keyword.iskeyword(func):
                rep.error(cn.loc, f"call must be 'package.module:function', got {ctext!r}")
                return None
            rule.call = CallSpec(module, func, cn.loc)
        return rule
    except PatternError as e:
        rep.error(e.loc, str(e), e.length)
        return None


def _parse_fact(node: YNode, reader, rep: Reporter) -> FactSpec | None:
    """`fact: KEY` or `fact: {key: KEY, value: VALUE}` or `fact: {keys: KEYS, value: VALUE}` (expressions)."""
    spec = FactSpec(node.loc)
    if not isinstance(node.value, dict):
        text = _text(node, "fact", rep)
        if text is None:
            return None
        spec.key = reader(node).expr(text, 0)
        return spec
    for key in node.value:
        if key not in FACT_KEYS:
            _unknown_key(rep, node, key, FACT_KEYS, "fact")
            return None
    if ("key" in node.value) == ("keys" in node.value):
        rep.error(node.loc, "a fact has `key:` (one key) or `keys:` (a sequence of them): give exactly one")
        return None
    for field_name in FACT_KEYS:
        sub = node.get(field_name)
        if sub is not None:
            text = _text(sub, f"fact {field_name}", rep)
            if text is None:
                return None
            setattr(spec, field_name, reader(sub).expr(text, 0))
    return spec


def _parse_lets(node: YNode, reader, rep: Reporter) -> list[Let]:
    """`let:` maps names to expressions, in order: each may read the captures and the names before it."""
    if not isinstance(node.value, dict):
        rep.error(node.loc, "`let:` maps names to expressions (name: expression, one per line)")
        return []
    out: list[Let] = []
    for name, value in node.value.items():
        loc = node.key_locs[name]
        if not isinstance(name, str):
            rep.error(loc, f"a let name must be text, not {name!r}")
            continue
        text = _text(value, f"let {name}", rep)
        if text is None:
            continue
        try:
            out.append(Let(name, loc, reader(value).expr(text, 0)))
        except PatternError as e:
            rep.error(e.loc, str(e), e.length)
    return out


def _dotted_name(text: str) -> bool:
    """`package.module`: the generated matcher imports it by this name."""
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


class _ReadError(PatternError):
    pass


def _read(text: str, node: YNode):
    if len(text) > MAX_SEXPR_CHARS:
        raise _ReadError(f"pattern of {len(text)} characters; a match or rewrite may have at most {MAX_SEXPR_CHARS}",
                         node.loc)
    try:
        return read_sexpr(text)
    except SexprError as e:
        raise _ReadError(str(e), node.loc_at(e.offset, text[e.offset:e.offset + 1]), e.length) from None
