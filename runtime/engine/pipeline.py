"""Run a pipeline file over a graph: the scheduler's (rules/schedule/pipeline.yaml) and codegen's.

A pipeline is data: an ordered list of stages, each naming its rule sets, its
traversal, its engine and its context type (or a Python step). `rulec build` checks
the file (the same check `rulec check` runs) and compiles it into a JSON artifact of
the build; this module runs that artifact's stages, and needs no YAML parser and no
compiler module to do it. It knows nothing of what the stages do.

Rule sets come from the build the pipeline was loaded from: rulec's own rules for
rulec's pipeline files; for any other file, the rule files of its folder first and
rulec's own sets for the names the folder does not define. That holds for the sets
the stages run and for those their Python runs itself (`matchers:`, current for the
duration of a run: runtime/engine/matchers.py).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rulec.runtime.engine import artifacts
from rulec.runtime.engine.matchers import StageMatchers, running
from rulec.runtime.ir.ops import Ops
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.engine.trace import active_trace
from rulec.runtime.ir.uop import UOp, op_mask

ENGINES = ("python", "egglog")


@dataclass
class Stage:
    name: str
    rules: list[str] = field(default_factory=list)
    bottom_up: bool = False
    context: str | None = None
    keep_result: bool = True
    call: str | None = None  # "module:function" for a Python step
    loc: str = ""
    engine: str = "python"  # or "egglog": each rule set saturated in turn, the cheapest form kept
    # `when_graph_has`: the ops (as a UOp._mask) without which the stage cannot fire; 0: it always runs
    needs_ops: int = 0

    @property
    def kind(self) -> str:
        """"call" (a Python step), "egglog" or "rules" (the python engine), as traces name it."""
        return "call" if self.call is not None else "egglog" if self.engine == "egglog" else "rules"


@dataclass
class Pipeline:
    path: Path
    contexts: dict[str, str]  # name -> "list", "dict" or "module:factory"
    stages: list[Stage]
    matchers: tuple[str, ...] = ()  # rule sets the pipeline's callbacks and helpers run themselves
    sources: list[Path] | None = None  # the build the file belongs to; None: rulec's own rules
    # each context factory and call step, imported once (a schedule runs every stage)
    _imported: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False, compare=False)
    # rule sets and composed stage matchers, resolved from the build once
    _sets: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _composed: dict[tuple[str, ...], Any] = field(default_factory=dict, repr=False, compare=False)
    _stage_matchers: list[StageMatchers] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def from_artifact(cls, path: Path, data: dict, sources: list[Path] | None = None) -> Pipeline:
        """The pipeline a build compiled from the file `path` (rulec/emit_pipeline.py writes `data`)."""
        stages = [Stage(s["name"], list(s["rules"]), s["bottom_up"], s["context"], s["keep_result"], s["call"],
                        s["loc"], s["engine"], op_mask(*(Ops[o] for o in s.get("when_graph_has", ()))))
                  for s in data["stages"]]
        return cls(path, dict(data["contexts"]), stages, tuple(data["matchers"]), sources)

    @property
    def label(self) -> str:
        """The pipeline's name in traces: its file, with the folder it is in ("codegen/cpu.pipeline.yaml")."""
        return f"{self.path.parent.name}/{self.path.name}"

    def without(self, *names: str) -> Pipeline:
        """A copy with the named stages removed (for experiments)."""
        return dataclasses.replace(self, stages=[s for s in self.stages if s.name not in names])

    def resolve(self, ref: str) -> Callable[..., Any]:
        """A context factory or call step: imported here, and only if defined in its (declared) module."""
        if ref in PLAIN_CONTEXTS:
            return {"list": list, "dict": dict}[ref]
        fn = self._imported.get(ref)
        if fn is None:
            from rulec.runtime.engine.callback_import import load_defined

            module, _, name = ref.partition(":")
            fn = self._imported[ref] = load_defined(module, name, [str(self.path.resolve().parent)])
        return fn

    def ruleset(self, name: str):
        """The rule set `name` of this pipeline's build (rulec's own when the build does not define it)."""
        rs = self._sets.get(name)
        if rs is None:
            rs = self._sets[name] = _ruleset(self.sources, name)
        return rs

    def matcher(self, names: tuple[str, ...]):
        """The rule sets `names` as one matcher, in order (a python-engine stage)."""
        m = self._composed.get(names)
        if m is None:
            parts = [self.ruleset(n).matcher for n in names]
            m = parts[0]
            for p in parts[1:]:
                m = m + p
            self._composed[names] = m
        return m

    def stage_matchers(self) -> StageMatchers:
        """The sets declared under `matchers:`, current while the pipeline runs (resolved on first use)."""
        if not self._stage_matchers:
            self._stage_matchers.append(StageMatchers(self.matchers, lambda n: self.ruleset(n).matcher,
                                                      str(self.path)))
        return self._stage_matchers[0]

    def make_context(self, name: str) -> Any:
        """A fresh context `name` (its factory is called with no arguments)."""
        return self.resolve(self.contexts[name])()


PLAIN_CONTEXTS = ("list", "dict")


def _ruleset(sources: list[Path] | None, name: str):
    if sources is not None and sources != artifacts.default_sources():
        out = artifacts.default_build_dir(sources)
        own = artifacts.use(sources, out, True,
                            lambda b: b.ruleset(name) if name in b.manifest["rulesets"] else None)
        if own is not None:
            return own
    return artifacts.shipped_ruleset(name)


def _sources_of(path: Path) -> list[Path]:
    """The build a pipeline file belongs to: rulec's own rules when it is one of them, else the rule files of
    its folder (as `rulec build FOLDER` builds them)."""
    shipped = artifacts.default_sources()
    if any(path.is_relative_to(d.resolve()) for d in shipped):
        return shipped
    return [path.parent]


_loaded: dict[tuple[str, str], Pipeline] = {}


def _cached_pipeline(path: str, sha: str) -> Pipeline:
    got = _loaded.get((path, sha))
    if got is not None:
        return got
    sources = _sources_of(Path(path))
    if sources == artifacts.default_sources():
        if artifacts.shipped_build().manifest["sources"].get(artifacts.source_key(Path(path))) != sha:
            # edited since rulec's build was checked in this process: check (and rebuild) it again, and
            # use the rule sets of that build from now on
            artifacts.forget_shipped()
            _loaded.clear()
        data = artifacts.from_shipped(lambda b: b.pipeline(Path(path)))
        pipe = Pipeline.from_artifact(Path(path), data)
    else:
        data = artifacts.use(sources, artifacts.default_build_dir(sources), True, lambda b: b.pipeline(Path(path)))
        pipe = Pipeline.from_artifact(Path(path), data, sources)
    _loaded[(path, sha)] = pipe
    return pipe


def load_pipeline(path: str | Path) -> Pipeline:
    """The compiled pipeline of a pipeline file, rebuilt when the file changed; a file with errors raises
    the compiler's CompileError, with file:line:col."""
    p = Path(path).resolve()
    return _cached_pipeline(str(p), artifacts.source_sha256(p))


def run_pipeline(sink: UOp, pipe: Pipeline) -> tuple[UOp, dict[str, Any]]:
    """Run every stage in order; returns the final graph and the contexts the stages used.

    For the duration of the run, the pipeline's `matchers:` are the current ones (matchers.current())."""
    contexts: dict[str, Any] = {}
    trace = active_trace()
    with running(pipe.stage_matchers()):
        for st in pipe.stages:
            if st.needs_ops and not sink._mask & st.needs_ops:
                continue  # none of the ops its rules need is in the graph: a pass would rewrite nothing
            if trace is None:
                sink = _run_stage(pipe, st, sink, contexts)
                continue
            matcher = pipe.matcher(tuple(st.rules)) if st.rules else None
            index = trace.stage_begin(pipe.label, st.name, st.kind, st.loc, tuple(st.rules), sink, matcher)
            t0 = time.perf_counter()
            try:
                sink = _run_stage(pipe, st, sink, contexts)
            finally:
                trace.stage_end(index, sink, time.perf_counter() - t0)
    return sink, contexts


def _run_stage(pipe: Pipeline, st: Stage, sink: UOp, contexts: dict[str, Any]) -> UOp:
    ctx = None
    if st.context is not None:
        if st.context not in contexts:
            contexts[st.context] = pipe.make_context(st.context)
        ctx = contexts[st.context]
    if st.call is not None:
        fn = pipe.resolve(st.call)
        return fn(sink, ctx) if st.context is not None else fn(sink)
    if st.engine == "egglog":
        out = sink
        # the checker allowed only pure sets with a program; a set with rules egglog cannot run was
        # a warning, and runs the rules that compiled
        for name in st.rules:
            out = pipe.ruleset(name).rewrite(out, engine="egglog", allow_partial=True)
    else:
        out = graph_rewrite(sink, pipe.matcher(tuple(st.rules)), ctx=ctx, bottom_up=st.bottom_up, name=st.name)
    return out if st.keep_result else sink
