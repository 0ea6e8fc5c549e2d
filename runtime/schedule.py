"""Run the scheduler pipeline of rules/schedule/pipeline.yaml over a tensor graph.

The pipeline is data: an ordered list of stages, each naming its rule sets, its
traversal and its context type (or a Python step). This module only reads that
file, checks it, and runs the stages in order.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .ops import Ops
from .resources import rules_dir
from .rewrite import graph_rewrite
from .uop import UOp

STAGE_KEYS = ("name", "rules", "traversal", "context", "result", "call")
TRAVERSALS = ("bottom_up", "top_down")


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
    contexts: dict[str, str]  # name -> "module:factory"
    stages: list[Stage]

    def without(self, *names: str) -> Pipeline:
        """A copy with the named stages removed (for experiments)."""
        return Pipeline(self.path, self.contexts, [s for s in self.stages if s.name not in names])


def default_pipeline_path() -> Path:
    return rules_dir() / "schedule" / "pipeline.yaml"


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.cache
def _cached_pipeline(path: str, mtime: float) -> Pipeline:
    return parse_pipeline(Path(path))


def load_pipeline(path: str | Path | None = None) -> Pipeline:
    p = Path(path) if path is not None else default_pipeline_path()
    return _cached_pipeline(str(p.resolve()), p.stat().st_mtime)


def parse_pipeline(path: Path) -> Pipeline:
    """Read and check a pipeline file; problems are CompileErrors with file:line:col."""
    from rulec.compiler import display_path
    from rulec.diagnostics import Reporter
    from rulec.source import load_yaml

    rep = Reporter()
    root = load_yaml(display_path(path), path.read_text())
    if root is None or not isinstance(root.value, dict):
        rep.error(root.loc if root else None, "a pipeline file has `contexts` and `stages`")
        rep.raise_if_errors()
    contexts: dict[str, str] = {}
    ctx_node = root.get("contexts")
    for name, node in (ctx_node.value.items() if ctx_node is not None else []):
        ref = node.value
        if not isinstance(ref, str) or ":" not in ref:
            rep.error(node.loc, f"context {name} must name a factory as 'module:callable'")
            continue
        try:
            _resolve(ref)
        except Exception as e:
            rep.error(node.loc, f"cannot import context factory {ref}: {type(e).__name__}: {e}")
        contexts[name] = ref
    stages: list[Stage] = []
    st_node = root.get("stages")
    if st_node is None or not isinstance(st_node.value, list):
        rep.error(root.loc, "a pipeline file needs a `stages` list")
        rep.raise_if_errors()
    for node in st_node.value:
        stages.append(_parse_stage(node, contexts, rep))
    rep.raise_if_errors()
    return Pipeline(path, contexts, stages)


def _parse_stage(node, contexts: dict[str, str], rep) -> Stage:
    v = node.value
    if not isinstance(v, dict) or "name" not in v:
        rep.error(node.loc, "a stage is a mapping with a name and rules (or call)")
        return Stage("?")
    for key in v:
        if key not in STAGE_KEYS:
            rep.error(node.key_locs[key], f"unknown stage key '{key}' (expected one of: {', '.join(STAGE_KEYS)})")
    st = Stage(str(v["name"].value), loc=str(node.loc))
    if ("rules" in v) == ("call" in v):
        rep.error(node.loc, f"stage '{st.name}' needs exactly one of `rules` and `call`")
    if "rules" in v:
        items = v["rules"].value if isinstance(v["rules"].value, list) else [v["rules"]]
        st.rules = [str(i.value) for i in items]
    if "call" in v:
        st.call = str(v["call"].value)
        try:
            _resolve(st.call)
        except Exception as e:
            rep.error(v["call"].loc, f"cannot import {st.call}: {type(e).__name__}: {e}")
    if "traversal" in v:
        t = v["traversal"].value
        if t not in TRAVERSALS:
            rep.error(v["traversal"].loc, f"traversal must be one of {', '.join(TRAVERSALS)}, not {t!r}")
        st.bottom_up = t == "bottom_up"
    if "context" in v:
        c = v["context"].value
        if c not in contexts:
            rep.error(v["context"].loc, f"unknown context '{c}' (declared: {', '.join(contexts) or 'none'})")
        st.context = c
    if "result" in v:
        r = v["result"].value
        if r not in ("keep", "discard"):
            rep.error(v["result"].loc, f"result must be keep or discard, not {r!r}")
        st.keep_result = r == "keep"
    return st


@functools.cache
def _matcher(names: tuple[str, ...]):
    from rulec.loader import load

    matchers = [load(n).matcher for n in names]
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
                contexts[st.context] = _resolve(pipe.contexts[st.context])()
            ctx = contexts[st.context]
        if st.call is not None:
            fn = _resolve(st.call)
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


def create_schedule(sink: UOp, pipeline: Pipeline | None = None) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """Schedule a SINK of tensor graphs: the kernels in run order, and what each original node becomes."""
    out, contexts = run_pipeline(sink, pipeline)
    items: list[ScheduleItem] = []
    for u in out.toposort():
        if u.op is not Ops.KERNEL:
            continue
        bufs = tuple(s.src[0] if s.op is Ops.ASSIGN else s for s in u.src if s.op is not Ops.BIND)
        binds = tuple(s for s in u.src if s.op is Ops.BIND)
        items.append(ScheduleItem(u.arg.ast, bufs, binds))
    originals: list[UOp] = contexts.get("uop_list", [])
    becomes: dict[UOp, UOp] = {}
    for s in out.src:
        for t in s.tag or ():
            if t is not None:
                becomes[originals[t]] = s.replace(tag=None)
    return items, becomes
