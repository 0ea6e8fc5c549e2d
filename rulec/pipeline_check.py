"""The scheduler's pipeline file, read and checked like a rule file.

    callbacks: [package.module]        # optional: modules `call:` and context factories may name
    contexts:                          # named rewrite contexts, shared by the stages that name them
      seen: list                       # an empty list or dict, or a factory `module:callable`
      state: package.module:State
    stages:                            # run in order
      - name: number the nodes
        rules: [rule_set, other_set]   # rule sets of rulec's rules/ folder, composed in order
        traversal: bottom_up           # or top_down (the default)
        context: seen                  # optional
        result: discard                # optional: keep (default) or discard the rewritten graph
      - name: a python step
        call: package.module:function  # function(sink) or, with a context, function(sink, ctx)

`read_pipeline` reports every problem as a `file:line:col` diagnostic and returns the
checked structure that `rulec.runtime.schedule.pipeline` runs. Checking imports nothing.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from rulec.runtime.schedule.pipeline import PLAIN_CONTEXTS  # an empty container: data, not code

from .callback_check import CallbackScope, find_definition
from .diagnostics import Loc, Reporter
from .parse import CALLBACKS_KEY, _dotted_name as dotted_name, parse_callbacks_key
from .source import YNode, load_yaml

PIPELINE_KEYS = (CALLBACKS_KEY, "contexts", "stages")
STAGE_KEYS = ("name", "rules", "traversal", "context", "result", "call")
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


@dataclass
class PipelineSpec:
    path: str
    callbacks: CallbackScope
    contexts: dict[str, ContextSpec]
    stages: list[StageSpec]

    def callback_refs(self) -> list[tuple[str, Loc]]:
        """Every `module:callable` the pipeline runs, with where it is named."""
        refs = [(c.factory, c.loc) for c in self.contexts.values() if c.factory and c.factory not in PLAIN_CONTEXTS]
        return refs + [(s.call, s.call_loc or s.loc) for s in self.stages if s.call is not None]


def shipped_ruleset_names() -> set[str]:
    """The rule sets a stage may name: those of rulec's rules/ folder, which the runtime loads by name."""
    from rulec.runtime.resources import rules_dir

    from rulec.runtime.engine.artifacts import rule_files

    names: set[str] = set()
    for f in rule_files([rules_dir()]):
        if is_pipeline_file(f) or f.name == "ops.yaml":
            continue
        root = load_yaml(str(f), f.read_text(encoding="utf-8"))
        if root is not None and isinstance(root.value, dict):
            names |= set(root.value) - {CALLBACKS_KEY}
    return names


def read_pipeline(path: str, text: str, rep: Reporter, rulesets: set[str] | None = None) -> PipelineSpec | None:
    """Check a pipeline file; None when it is too broken to read further (the reasons are in `rep`)."""
    root = load_yaml(path, text)
    if root is None or not isinstance(root.value, dict):
        rep.error(root.loc if root is not None else Loc(path, 1, 1), "a pipeline file maps `contexts` and `stages`")
        return None
    unknown = [key for key in root.value if key not in PIPELINE_KEYS]
    for key in unknown:
        _unknown(rep, root.key_locs[key], key, PIPELINE_KEYS, "pipeline key")
    scope = parse_callbacks_key(root, path, rep)
    contexts = _contexts(root.get("contexts"), scope, rep)
    node = root.get("stages")
    if node is None and unknown:
        return PipelineSpec(path, scope, contexts, [])  # a misspelled `stages` is reported already
    if node is None or not isinstance(node.value, list) or not node.value:
        rep.error(node.loc if node is not None else root.key_locs.get("contexts", root.loc),
                  "a pipeline file needs a non-empty `stages` list")
        return PipelineSpec(path, scope, contexts, [])
    known = shipped_ruleset_names() if rulesets is None else rulesets
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
    return PipelineSpec(path, scope, contexts, stages)


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
            if found is not None and found.kind == "function" and (found.required > 0 or found.keyword_only):
                rep.error(value.loc, f"context factory {ref[1]} must take no arguments, but it takes "
                                     f"{', '.join(found.positional + found.keyword_only)}")
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
    if "call" in v:
        for key in ("traversal", "result"):
            if key in v:
                rep.error(node.key_locs[key], f"`{key}` applies to rule stages; stage '{name}' is a `call`", len(key))
        ref = _ref(v["call"], "call", rep)
        if ref is not None:
            st.call, st.call_loc = f"{ref[0]}:{ref[1]}", v["call"].loc
            _check_step(ref, st, v["call"].loc, scope, rep)
    return st


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
