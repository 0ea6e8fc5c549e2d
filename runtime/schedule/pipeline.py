"""Run the scheduler pipeline of rules/schedule/pipeline.yaml over a tensor graph.

The pipeline is data: an ordered list of stages, each naming its rule sets, its
traversal and its context type (or a Python step). `rulec build` checks the file
(the same check `rulec check` runs) and compiles it into a JSON artifact of the
build; this module runs that artifact's stages with the build's matchers, and
needs no YAML parser and no compiler module to do it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rulec.runtime.engine import artifacts
from rulec.runtime.schedule.kernel_check import check_kernel
from rulec.runtime.ir.ops import Ops
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.ir.uop import UOp


@dataclass
class Stage:
    name: str
    rules: list[str] = field(default_factory=list)
    bottom_up: bool = False
    context: str | None = None
    keep_result: bool = True
    call: str | None = None  # "module:function" for a Python step
    loc: str = ""


@dataclass
class Pipeline:
    path: Path
    contexts: dict[str, str]  # name -> "list", "dict" or "module:factory"
    stages: list[Stage]
    # each context factory and call step, imported once (a schedule runs every stage)
    _imported: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_artifact(cls, path: Path, data: dict) -> Pipeline:
        """The pipeline a build compiled from the file `path` (rulec/emit_pipeline.py writes `data`)."""
        stages = [Stage(s["name"], list(s["rules"]), s["bottom_up"], s["context"], s["keep_result"], s["call"],
                        s["loc"]) for s in data["stages"]]
        return cls(path, dict(data["contexts"]), stages)

    def without(self, *names: str) -> Pipeline:
        """A copy with the named stages removed (for experiments)."""
        return Pipeline(self.path, self.contexts, [s for s in self.stages if s.name not in names])

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


PLAIN_CONTEXTS = ("list", "dict")


def default_pipeline_path() -> Path:
    from rulec.runtime.resources import rules_dir

    return (rules_dir() / "schedule" / "pipeline.yaml").resolve()


def _sources_of(path: Path) -> list[Path]:
    """The build a pipeline file belongs to: rulec's own rules when it is one of them, else the file alone."""
    shipped = artifacts.default_sources()
    if any(path.is_relative_to(d.resolve()) for d in shipped):
        return shipped
    return [path]


@functools.cache
def _cached_pipeline(path: str, sha: str) -> Pipeline:
    sources = _sources_of(Path(path))
    if sources == artifacts.default_sources():
        if artifacts.shipped_build().manifest["sources"].get(artifacts.source_key(Path(path))) != sha:
            # edited since rulec's build was checked in this process: check (and rebuild) it again, and
            # use the rule sets of that build from now on
            artifacts.forget_shipped()
            _matcher.cache_clear()
        data = artifacts.from_shipped(lambda b: b.pipeline(Path(path)))
    else:
        data = artifacts.use(sources, artifacts.default_build_dir(sources), True, lambda b: b.pipeline(Path(path)))
    return Pipeline.from_artifact(Path(path), data)


def load_pipeline(path: str | Path | None = None) -> Pipeline:
    """The compiled pipeline of a pipeline file (rulec's own by default), rebuilt when the file changed;
    a file with errors raises the compiler's CompileError, with file:line:col."""
    p = Path(path).resolve() if path is not None else default_pipeline_path()
    return _cached_pipeline(str(p), artifacts.source_sha256(p))


parse_pipeline = load_pipeline  # the name older callers use


@functools.cache
def _matcher(names: tuple[str, ...]):
    matchers = [artifacts.shipped_matcher(n) for n in names]
    out = matchers[0]
    for m in matchers[1:]:
        out = out + m
    return out


def run_pipeline(sink: UOp, pipeline: Pipeline | None = None) -> tuple[UOp, dict[str, Any]]:
    """Run every stage in order; returns the final graph and the contexts the stages used."""
    pipe = pipeline or load_pipeline()
    contexts: dict[str, Any] = {}
    for st in pipe.stages:
        ctx = None
        if st.context is not None:
            if st.context not in contexts:
                contexts[st.context] = pipe.resolve(pipe.contexts[st.context])()
            ctx = contexts[st.context]
        if st.call is not None:
            fn = pipe.resolve(st.call)
            sink = fn(sink, ctx) if st.context is not None else fn(sink)
            continue
        out = graph_rewrite(sink, _matcher(tuple(st.rules)), ctx=ctx, bottom_up=st.bottom_up, name=st.name)
        if st.keep_result:
            sink = out
    return sink, contexts


# ------------------------------------------------------------------ schedule items


@dataclass(frozen=True)
class ScheduleItem:
    """One kernel to run: its AST and the buffers bound to its DEFINE_GLOBALs, in order."""

    ast: UOp
    buffers: tuple[UOp, ...]  # BUFFER nodes
    bound_vars: tuple[UOp, ...] = ()  # BIND nodes

    @property
    def outputs(self) -> tuple[int, ...]:
        return tuple(st.src[0].src[0].arg for st in self.ast.src if st.op is Ops.STORE)

    @property
    def device(self) -> str:
        """The device the kernel runs on: that of the buffer it writes (its first)."""
        b = self.buffers[0]
        return b.src[1].arg if len(b.src) > 1 and b.src[1].op is Ops.DEVICE else "CPU"

    def render(self, language: str = "c") -> str:
        """The kernel's complete source in `language`: "c", "opencl", "cuda" or "metal"."""
        if _renderer is None:
            raise RuntimeError("no renderer registered (import rulec)")
        return _renderer(self.ast, language)


# the backends sit above the scheduler; the Tensor layer registers their renderer here
_renderer: Callable[[UOp, str], str] | None = None


def set_renderer(fn: Callable[[UOp, str], str]) -> None:
    global _renderer
    _renderer = fn


def create_schedule(sink: UOp, pipeline: Pipeline | None = None) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """Schedule a SINK of tensor graphs: the kernels in run order, and what each original node becomes."""
    out, contexts = run_pipeline(sink, pipeline)
    items: list[ScheduleItem] = []
    # run order is the order of the ASSIGNs, not of their KERNELs: an ASSIGN also lists the kernels that
    # must run before it (assign ordering), which its KERNEL does not
    for a in out.toposort():
        if a.op is not Ops.ASSIGN or len(a.src) < 2 or a.src[1].op is not Ops.KERNEL:
            continue
        u = a.src[1]
        bufs = tuple(s.src[0] if s.op is Ops.ASSIGN else s for s in u.src if s.op is not Ops.BIND)
        binds = tuple(s for s in u.src if s.op is Ops.BIND)
        check_kernel(u.arg.ast, bufs)  # a safety net: an unsafe kernel is a scheduler bug, never run
        items.append(ScheduleItem(u.arg.ast, bufs, binds))
    originals: list[UOp] = contexts.get("uop_list", [])
    becomes: dict[UOp, UOp] = {}
    for s in out.src:
        for t in s.tag or ():
            if t is not None:
                becomes[originals[t]] = s.replace(tag=None)
    return items, becomes
