"""Lower a kernel AST for a target: the rules/codegen/ pipeline of that target, then the linearizer.

The result, `LoweredKernel`, is what every backend renders: the ordered steps, the kernel's buffers
(DEFINE_GLOBAL, by number), its variables (DEFINE_VAR, by name), which buffers it writes, and its thread
ids with their sizes (GPU targets).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from rulec.runtime.codegen.linearize import LinearizeError, Step, linearize
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp, untagged
from rulec.runtime.resources import rules_dir
from rulec.runtime.engine.pipeline import Pipeline, load_pipeline, run_pipeline

# the lowering pipeline of each kind of target, under rules/codegen/
PIPELINES = {"cpu": "cpu.pipeline.yaml", "gpu": "gpu.pipeline.yaml"}
# the CPU pipeline's step that unrolls a tile of output loops (runtime/codegen/steps.py)
UPCAST_STAGE = "upcast"


@dataclass(frozen=True)
class LoweredKernel:
    ast: UOp  # the kernel as the scheduler gave it
    lowered: UOp  # after the codegen rules
    steps: tuple[Step, ...]
    globals: tuple[UOp, ...]  # DEFINE_GLOBAL nodes, by arg
    variables: tuple[UOp, ...]  # DEFINE_VAR nodes, by name
    outputs: tuple[int, ...]  # the DEFINE_GLOBAL numbers the kernel stores to
    thread_dims: tuple[tuple[int, int], ...]  # (dimension, size) of each thread id, dimension 0 first

    @property
    def global_size(self) -> tuple[int, int, int]:
        size = [1, 1, 1]
        for dim, n in self.thread_dims:
            size[dim] = n
        return size[0], size[1], size[2]


def lower(ast: UOp, target: str = "cpu", without: tuple[str, ...] = (), pipeline: Pipeline | None = None) -> LoweredKernel:
    """`ast` lowered for `target` ("cpu": loops; "gpu": outer loops as thread ids), leaving out the stages
    named in `without` (for measurements: `("upcast",)` gives the plain loop nests). `pipeline` lowers with
    another lowering pipeline instead of rulec's (experiments such as stages switched to egglog; not cached)."""
    if pipeline is not None:
        return _lower_with(ast, pipeline.without(*without) if without else pipeline)
    # a kernel AST keeps its schedule's tags; without them, an equal kernel of a later schedule (the next
    # step of a training loop) is the same node and is lowered once
    return _lower(untagged(ast), target, tuple(without))


@functools.lru_cache(maxsize=4096)
def _lower(ast: UOp, target: str, without: tuple[str, ...] = ()) -> LoweredKernel:
    if target not in PIPELINES:
        raise ValueError(f"unknown lowering target {target!r}: expected one of {sorted(PIPELINES)}")
    pipe = load_pipeline(rules_dir() / "codegen" / PIPELINES[target])
    return _lower_with(ast, pipe.without(*without) if without else pipe)


def _lower_with(ast: UOp, pipe: Pipeline) -> LoweredKernel:
    sink = ast if ast.op is Ops.SINK else UOp.sink(ast)
    lowered, _ = run_pipeline(sink, pipe)
    nodes = lowered.toposort()
    # every buffer of the kernel is a parameter, also one whose every read the rules folded away (a window
    # that only reads padding): the runner passes the schedule item's buffers, all of them
    by_arg = {u.arg: u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}
    by_arg.update((u.arg, u) for u in nodes if u.op is Ops.DEFINE_GLOBAL)
    globals_ = tuple(by_arg[a] for a in sorted(by_arg))
    variables = tuple(sorted((u for u in nodes if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0]))
    outputs = tuple(sorted({u.src[0].src[0].arg for u in nodes if u.op is Ops.STORE
                            and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL}))
    dims = tuple(sorted((u.arg, u.src[0].arg) for u in nodes if u.op is Ops.SPECIAL))
    try:
        steps = tuple(linearize(lowered))
    except LinearizeError:
        if not any(s.name == UPCAST_STAGE for s in pipe.stages):
            raise
        # the lanes of an upcast tile share their reduce loops; when the rules fold a lane's reduction to
        # depend on fewer loops than another's (a comparison with the lane's constant), one loop would need
        # two nestings. The kernel is lowered without the tile instead.
        return _lower_with(ast, pipe.without(UPCAST_STAGE))
    return LoweredKernel(ast, lowered, steps, globals_, variables, outputs, dims)
