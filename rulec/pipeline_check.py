"""The scheduler's pipeline file, read and checked like a rule file.

    callbacks: [package.module]        # optional: modules `call:` and context factories may name
    matchers: [rule_set]               # optional: rule sets the Python of the stages runs itself
    contexts:                          # named rewrite contexts, shared by the stages that name them
      seen: list                       # an empty list or dict, or a factory `module:callable`
      state: package.module:State      # (given the matchers when it has a `matchers` parameter)
    stages:                            # run in order
      - name: number the nodes
        rules: [rule_set, other_set]   # rule sets of the pipeline's build, composed in order
        traversal: bottom_up           # or top_down (the default)
        context: seen                  # optional
        result: discard                # optional: keep (default) or discard the rewritten graph
        when_graph_has: [MULTI]        # optional: run only on graphs with one of these ops (else skip)
      - name: fold the index arithmetic
        rules: [rule_set]
        engine: egglog                 # optional: python (the default) or egglog
      - name: a python step
        call: package.module:function  # function(sink) or, with a context, function(sink, ctx)

A rule set is one of the pipeline's build: the rule files of its folder (rulec's own rules for
rulec's pipeline files), then rulec's own sets for names the folder does not define.

`read_pipeline` reports every problem as a `file:line:col` diagnostic and returns the
checked structure that `rulec.runtime.engine.pipeline` runs. Checking imports nothing; a
stage on the egglog engine has its rule sets compiled (not imported) to see which rules
egglog can run.
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path

from rulec.runtime.engine.pipeline import ENGINES, PLAIN_CONTEXTS  # data, not code

from .callback_check import CallbackScope, find_definition
from .diagnostics import CompileError, Loc, Reporter
from .parse import CALLBACKS_KEY, _dotted_name as dotted_name, parse_callbacks_key
from .source import YNode, load_yaml

PIPELINE_KEYS = (CALLBACKS_KEY, "matchers", "contexts", "stages")
STAGE_KEYS = ("name", "rules", "traversal", "context", "result", "call", "engine", "when_graph_has")
TRAVERSALS = ("bottom_up", "top_down")
RESULTS = ("keep", "discard")


def is_pipeline_file(path: str | Path) -> bool:
    name = Path(path).name
    return name == "pipeline.yaml" or name.endswith(".pipeline.yaml")


@dataclass
class ContextSpec:
    name: str
    factory: str  # "list", "dict" or "module:callable"
    loc: Loc


@dataclass
class StageSpec:
    name: str
    loc: Loc
    rules: list[str] = field(default_factory=list)
    bottom_up: bool = False
    context: str | None = None
    keep_result: bool = True
    call: str | None = None  # "module:function" for a Python step
    call_loc: Loc | None = None
    engine: str = "python"
    engine_loc: Loc | None = None
    rule_locs: list[Loc] = field(default_factory=list)  # of each name in `rules`
    when_graph_has: list[str] = field(default_factory=list)  # op names; empty: the stage always runs


@dataclass
class PipelineSpec:
    path: str
    callbacks: CallbackScope
    contexts: dict[str, ContextSpec]
    stages: list[StageSpec]
    matchers: list[str] = field(default_factory=list)  # rule sets callbacks and helpers run themselves

    def callback_refs(self) -> list[tuple[str, Loc]]:
        """Every `module:callable` the pipeline runs, with where it is named."""
        refs = [(c.factory, c.loc) for c in self.contexts.values() if c.factory and c.factory not in PLAIN_CONTEXTS]
        return refs + [(s.call, s.call_loc or s.loc) for s in self.stages if s.call is not None]


def _defined_names(folder: Path) -> set[str]:
    """The rule sets the rule files under `folder` define (their top-level keys; parsed, not checked)."""
    names: set[str] = set()
    for f in _rule_files_of(folder):
        try:
            root = load_yaml(str(f), f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, CompileError):
            continue  # the file's own check reports it
        if root is not None and isinstance(root.value, dict):
            names |= set(root.value) - {CALLBACKS_KEY}
    return names


def _rule_files_of(folder: Path) -> list[Path]:
    from rulec.runtime.engine.artifacts import rule_files

    return [f for f in rule_files([folder]) if not is_pipeline_file(f) and f.name != "ops.yaml"]


def build_folders(path: str | Path) -> list[Path]:
    """Where the rule sets of the pipeline file `path` come from, first match first: rulec's own rules for one
    of rulec's files; else the pipeline's folder, then rulec's own rules (as rulec.runtime.engine.pipeline
    resolves them)."""
    from rulec.runtime.engine.artifacts import default_sources

    shipped = [d.resolve() for d in default_sources()]
    p = Path(path).resolve()
    return shipped if any(p.is_relative_to(d) for d in shipped) else [p.parent, *shipped]


def known_ruleset_names(path: str | Path) -> set[str]:
    """The rule sets the pipeline file `path` may name."""
    names: set[str] = set()
    for folder in build_folders(path):
        names |= _defined_names(folder)
    return names


def read_pipeline(path: str, text: str, rep: Reporter, rulesets: set[str] | None = None) -> PipelineSpec | None:
    """Check a pipeline file; None when it is too broken to read further (the reasons are in `rep`)."""
    errors_before = len(rep.errors)  # the reporter may carry other files' errors
    root = load_yaml(path, text)
    if root is None or not isinstance(root.value, dict):
        rep.error(root.loc if root is not None else Loc(path, 1, 1), "a pipeline file maps `contexts` and `stages`")
        return None
    unknown = [key for key in root.value if key not in PIPELINE_KEYS]
    for key in unknown:
        _unknown(rep, root.key_locs[key], key, PIPELINE_KEYS, "pipeline key")
    scope = parse_callbacks_key(root, path, rep)
    contexts = _contexts(root.get("contexts"), scope, rep)
    known = known_ruleset_names(path) if rulesets is None else rulesets
    matchers = _matchers(root.get("matchers"), known, rep)
    node = root.get("stages")
    if node is None and unknown:
        return PipelineSpec(path, scope, contexts, [], matchers)  # a misspelled `stages` is reported already
    if node is None or not isinstance(node.value, list) or not node.value:
        rep.error(node.loc if node is not None else root.key_locs.get("contexts", root.loc),
                  "a pipeline file needs a non-empty `stages` list")
        return PipelineSpec(path, scope, contexts, [], matchers)
    stages: list[StageSpec] = []
    seen: dict[str, Loc] = {}
    for item in node.value:
        st = _stage(item, contexts, scope, known, rep)
        if st is None:
            continue
        if st.name in seen:
            rep.error(st.loc, f"stage name '{st.name}' is already used at {seen[st.name]}", len(st.name))
        seen.setdefault(st.name, st.loc)
        stages.append(st)
    egglog = [st for st in stages if st.engine == "egglog" and st.call is None]
    if egglog and len(rep.errors) == errors_before:
        _check_egglog_sets(path, egglog, rep)
    return PipelineSpec(path, scope, contexts, stages, matchers)


def _matchers(node: YNode | None, known: set[str], rep: Reporter) -> list[str]:
    if node is None:
        return []
    if not isinstance(node.value, list):
        rep.error(node.loc, "`matchers` is a list of rule-set names")
        return []
    out: list[str] = []
    for it in node.value:
        name = _text(it, "a rule-set name", rep)
        if name is None:
            continue
        if name not in known:
            _unknown(rep, it.loc, name, sorted(known), "rule set")
        elif name in out:
            rep.error(it.loc, f"rule set '{name}' is listed twice under `matchers`", len(name))
        out.append(name)
    return out


def _unknown(rep: Reporter, loc: Loc, value: str, allowed: tuple[str, ...] | list[str], what: str) -> None:
    close = difflib.get_close_matches(value, list(allowed), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of: {', '.join(allowed)})"
    rep.error(loc, f"unknown {what} '{value}'{hint}", len(value))


def _text(node: YNode, what: str, rep: Reporter) -> str | None:
    if isinstance(node.value, str):
        return node.value
    rep.error(node.loc, f"{what} must be text")
    return None


def _ref(node: YNode, what: str, rep: Reporter) -> tuple[str, str] | None:
    text = _text(node, what, rep)
    if text is None:
        return None
    module, sep, name = text.strip().partition(":")
    if not sep or not dotted_name(module) or not dotted_name(name) or "." in name:
        rep.error(node.loc, f"{what} must be 'package.module:function', got {text!r}")
        return None
    return module, name


def _contexts(node: YNode | None, scope: CallbackScope, rep: Reporter) -> dict[str, ContextSpec]:
    out: dict[str, ContextSpec] = {}
    if node is None:
        return out
    if not isinstance(node.value, dict):
        rep.error(node.loc, "contexts map names to `list`, `dict` or a factory 'module:callable'")
        return out
    for name, value in node.value.items():
        if isinstance(value.value, str) and value.value in PLAIN_CONTEXTS:
            out[name] = ContextSpec(name, value.value, value.loc)
            continue
        ref = _ref(value, f"context '{name}'", rep)
        if ref is not None:
            found = find_definition(*ref, scope, value.loc, rep, what="context factory")
            # it is called with no arguments
            needed = (found.positional[:found.required] + found.keyword_only
                      if found is not None and found.kind == "function" else [])
            if needed:
                rep.error(value.loc, f"context factory {ref[1]} must take no arguments, but it takes "
                                     f"{', '.join(needed)}")
        # a bad factory is reported above; the name stays declared so stages naming it are not reported too
        out[name] = ContextSpec(name, value.value.strip() if ref is not None else "", value.loc)
    return out


def _stage(node: YNode, contexts: dict[str, ContextSpec], scope: CallbackScope, known: set[str],
           rep: Reporter) -> StageSpec | None:
    v = node.value
    if not isinstance(v, dict) or "name" not in v:
        rep.error(node.loc, "a stage is a mapping with a name and rules (or call)")
        return None
    for key in v:
        if key not in STAGE_KEYS:
            _unknown(rep, node.key_locs[key], key, STAGE_KEYS, "stage key")
    name = _text(v["name"], "a stage name", rep)
    if name is None:
        return None
    st = StageSpec(name, v["name"].loc)
    if ("rules" in v) == ("call" in v):
        what = "both" if "rules" in v else "neither"
        rep.error(st.loc, f"stage '{name}' has {what} `rules` and `call`: give exactly one", len(name))
    if "rules" in v:
        items = v["rules"].value if isinstance(v["rules"].value, list) else [v["rules"]]
        if not items:
            rep.error(v["rules"].loc, f"stage '{name}' runs no rule sets")
        for it in items:
            rs = _text(it, "a rule-set name", rep)
            if rs is None:
                continue
            if rs not in known:
                _unknown(rep, it.loc, rs, sorted(known), "rule set")
            st.rules.append(rs)
            st.rule_locs.append(it.loc)
    if "traversal" in v:
        t = v["traversal"]
        if t.value not in TRAVERSALS:
            shown = t.value if isinstance(t.value, str) else str(t.raw)
            close = difflib.get_close_matches(shown, TRAVERSALS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            rep.error(t.loc, f"traversal must be one of {', '.join(TRAVERSALS)}, not {shown!r}{hint}", len(shown))
        st.bottom_up = t.value == "bottom_up"
    if "context" in v:
        c = _text(v["context"], "context", rep)
        if c is not None and c not in contexts:
            declared = list(contexts)
            close = difflib.get_close_matches(c, declared, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"declared: {', '.join(declared) or 'none'}"
            rep.error(v["context"].loc, f"unknown context '{c}' ({hint})", len(c))
        st.context = c
    if "result" in v:
        r = v["result"]
        if r.value not in RESULTS:
            rep.error(r.loc, f"result must be keep or discard, not {r.value!r}", len(str(r.raw or r.value)))
        st.keep_result = r.value != "discard"
    if "engine" in v:
        _engine(v["engine"], node, st, rep)
    if "when_graph_has" in v:
        st.when_graph_has = _op_names(v["when_graph_has"], name, rep)
    if "call" in v:
        for key in ("traversal", "result"):
            if key in v:
                rep.error(node.key_locs[key], f"`{key}` applies to rule stages; stage '{name}' is a `call`", len(key))
        ref = _ref(v["call"], "call", rep)
        if ref is not None:
            st.call, st.call_loc = f"{ref[0]}:{ref[1]}", v["call"].loc
            _check_step(ref, st, v["call"].loc, scope, rep)
    return st


def _op_names(node: YNode, stage: str, rep: Reporter) -> list[str]:
    """`when_graph_has:` of a stage: a non-empty list of ops of the op table."""
    from rulec.runtime.ir.ops import Ops

    items = node.value if isinstance(node.value, list) else [node]
    if not items:
        rep.error(node.loc, f"stage '{stage}': when_graph_has lists no ops (leave the key out to always run)")
    names = []
    for it in items:
        op = _text(it, "an op name", rep)
        if op is None:
            continue
        if op not in Ops.__members__:
            close = difflib.get_close_matches(op, list(Ops.__members__), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see rules/ops.yaml"
            rep.error(it.loc, f"unknown op '{op}' in when_graph_has ({hint})", len(op))
            continue
        names.append(op)
    return names


def _engine(e: YNode, stage: YNode, st: StageSpec, rep: Reporter) -> None:
    """`engine:` of a stage; egglog runs pure rule sets only: no `call`, no context, no traversal."""
    shown = e.value if isinstance(e.value, str) else str(e.raw)
    if e.value not in ENGINES:
        close = difflib.get_close_matches(shown, ENGINES, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        rep.error(e.loc, f"unknown engine '{shown}': a stage runs on one of {', '.join(ENGINES)}{hint}", len(shown))
        return
    st.engine, st.engine_loc = e.value, e.loc
    if e.value != "egglog":
        return
    v = stage.value
    if "call" in v:
        rep.error(e.loc, f"stage '{st.name}' is a `call`: a Python step runs no engine", len(shown))
    if "context" in v:
        rep.error(e.loc, f"stage '{st.name}' has a context ('{st.context}'); the egglog engine runs pure rules "
                         f"and passes no context: use the python engine", len(shown))
    if "traversal" in v:
        rep.error(stage.key_locs["traversal"], f"`traversal` applies to the python engine; stage '{st.name}' "
                                               f"runs on egglog, which saturates the whole graph", len("traversal"))


@dataclass(frozen=True)
class EgglogFacts:
    """What the egglog engine can do with one rule set, as the build would emit it."""

    rules: int
    impure: tuple[str, ...]  # rules with `call:` or `fact:` (Python, and the stage context)
    compiled: int  # rules of its egglog program
    skipped: tuple[tuple[str, str], ...]  # (rule, why) of the rules left out of it


def _check_egglog_sets(path: str, stages: list[StageSpec], rep: Reporter) -> None:
    """Each rule set of an egglog stage: no callbacks or facts, and an egglog program (warn when partial)."""
    facts = egglog_facts(path, {n for st in stages for n in st.rules})
    for st in stages:
        for name, loc in zip(st.rules, st.rule_locs):
            f = facts.get(name)
            if f is None:  # its files have errors of their own (reported where they are checked)
                continue
            if f.impure:
                rep.error(loc, f"rule set '{name}' has callbacks ({_listed(f.impure)}): stage '{st.name}' can "
                               f"run it on the python engine only", len(name))
            elif f.compiled == 0:
                why = _listed([f"{r}: {w}" for r, w in f.skipped]) if f.skipped else "it has no rules"
                rep.error(loc, f"rule set '{name}' has no egglog program: none of its rules compiles to egglog "
                               f"({why})", len(name))
            elif f.skipped:
                rep.warning(loc, f"on egglog, stage '{st.name}' runs {f.compiled} of the {f.rules} rules of "
                                 f"'{name}'; left out: {_listed([f'{r} ({w})' for r, w in f.skipped])}", len(name))


def _listed(items, most: int = 3) -> str:
    items = list(items)
    more = f", and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def egglog_facts(path: str | Path, names: set[str]) -> dict[str, EgglogFacts]:
    """For the rule sets `names` of the pipeline file `path`'s build: what runs on egglog. Sets whose files
    fail to check are left out."""
    from rulec.runtime.engine.artifacts import source_hashes

    out: dict[str, EgglogFacts] = {}
    found: set[str] = set()
    for folder in build_folders(path):
        key = tuple(sorted(source_hashes(list(_rule_files_of(folder))).items()))
        defined = _folder_defines(str(folder), key)
        for name in sorted(names - found):
            if name in defined:  # the first folder defining it is where it comes from, even with errors
                found.add(name)
                f = _facts_of(str(folder), key, name)
                if f is not None:
                    out[name] = f
    return out


@functools.lru_cache(maxsize=16)
def _folder_defines(folder: str, key: tuple) -> frozenset[str]:
    return frozenset(_defined_names(Path(folder)))


@functools.lru_cache(maxsize=16)
def _checked_table(folder: str, key: tuple):
    """The checked rule sets of the rule files under `folder` (key: their hashes), or None with errors."""
    from .check import check
    from .compiler import display_path
    from .parse import parse_file
    from .reading import SourceError, read_source

    rep = Reporter()
    parsed = []
    for f in _rule_files_of(Path(folder)):
        name = display_path(f)
        try:
            parsed.append(parse_file(name, read_source(f, name), rep))
        except (SourceError, CompileError):
            return None
    table = check(parsed, rep)
    return None if rep.errors else table


@functools.lru_cache(maxsize=64)
def _facts_of(folder: str, key: tuple, name: str) -> EgglogFacts | None:
    from .emit_egglog import emit_egglog

    table = _checked_table(folder, key)
    if table is None or name not in table:
        return None
    rules = table[name].all_rules(table)
    impure = tuple(r.name for r in rules if not r.pure)
    egg = emit_egglog(name, rules)
    return EgglogFacts(len(rules), impure, len(egg.rules),
                       tuple((r.name, why) for r, why in egg.skipped))


def _check_step(ref: tuple[str, str], st: StageSpec, loc: Loc, scope: CallbackScope, rep: Reporter) -> None:
    """A call step is run as function(sink), or function(sink, ctx) when the stage has a context."""
    found = find_definition(*ref, scope, loc, rep, what="call")
    if found is None:
        return
    if found.kind != "function":
        rep.error(loc, f"'{st.call}' is a class; a call step is a function")
        return
    want = 2 if st.context is not None else 1
    takes = "(sink, ctx)" if want == 2 else "(sink)"
    if not (found.required <= want and (len(found.positional) >= want or found.star)):
        rep.error(loc, f"call step {ref[1]} takes {len(found.positional)} positional parameter"
                       f"{'s' * (len(found.positional) != 1)} ({', '.join(found.positional) or 'none'}); stage "
                       f"'{st.name}' calls it as {ref[1]}{takes}")
