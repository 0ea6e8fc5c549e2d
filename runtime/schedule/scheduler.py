"""The scheduler: rulec's scheduler pipeline (rules/schedule/pipeline.yaml) run over a SINK of tensor graphs,
and the kernels it leaves, in run order, as ScheduleItems."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rulec.runtime.engine.pipeline import Pipeline, load_pipeline, run_pipeline
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp, untagged
from rulec.runtime.schedule.kernel_check import check_kernel
from rulec.runtime.schedule.schedule_cache import cached_schedule, forget_schedules



def _iterations(ranges: tuple[UOp, ...], bound: dict[UOp, int]) -> int:
    """How many times a body inside `ranges` runs: the product of their sizes (a symbolic size evaluated
    with the kernel's bound variables, or its upper bound)."""
    n = 1
    for r in ranges:
        size = r.src[0]
        if size.op is Ops.CONST:
            n *= size.arg
        else:
            value = size.substitute({v: UOp.const(v.dtype, x) for v, x in bound.items()}) if bound else size
            n *= int(value.arg) if value.op is Ops.CONST else int(value.vmax)
    return n

def default_pipeline_path() -> Path:
    from rulec.runtime.resources import rules_dir

    return (rules_dir() / "schedule" / "pipeline.yaml").resolve()


def schedule_pipeline() -> Pipeline:
    """rulec's scheduler pipeline, compiled (rebuilt when a rule file changed)."""
    return load_pipeline(default_pipeline_path())


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
    def ops(self) -> int:
        """How many value operations the kernel runs (`GlobalCounters.global_ops`; an estimate of the kind
        tinygrad makes): each ALU op on values (not index arithmetic) once per iteration of the loops open
        around it, and each reduce once per iteration of its loops. A loop of symbolic size counts at its
        bound variable's value."""
        bound = {b.src[0]: b.src[1].arg for b in self.bound_vars}
        total = 0
        for u in self.ast.toposort():
            if u.op is Ops.REDUCE:
                total += _iterations(u.src[0].ranges, bound)
            elif u.op in GroupOp.ALU and u.dtype.scalar != dtypes.index and \
                    not all(s.dtype.scalar == dtypes.index for s in u.src):
                total += _iterations(u.ranges, bound)
        return total

    @property
    def is_copy(self) -> bool:
        """A copy between devices (a memory copy when run, no kernel code)."""
        return self.ast.op is Ops.STORE and self.ast.src[1].op is Ops.COPY

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
    """Schedule a SINK of tensor graphs: the kernels in run order, and what each original node becomes.
    A graph equal to an earlier one but for its buffers reuses that one's schedule (schedule_cache.py)."""
    pipe = pipeline or schedule_pipeline()
    return cached_schedule(sink, pipe, lambda g: _schedule(g, pipe))


def _schedule(sink: UOp, pipeline: Pipeline) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
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
        _one_value_per_variable(binds)
        check_kernel(u.arg.ast, bufs)  # a safety net: an unsafe kernel is a scheduler bug, never run
        items.append(ScheduleItem(u.arg.ast, bufs, binds))
    originals: list[UOp] = contexts.get("uop_list", [])
    becomes: dict[UOp, UOp] = {}
    memo: dict[UOp, UOp] = {}  # shared by the outputs: a walk below each one would be quadratic
    for s in out.src:
        # what a tensor becomes must not carry this schedule's numbering into the next (an output that is a
        # view of a buffer keeps the tags of the views below it)
        value = untagged(s, memo)
        for t in s.tag or ():
            if t is not None:
                becomes[originals[t]] = value
    return items, becomes


class BindMismatchError(ValueError, RuntimeError):
    """One variable bound to two values in one kernel. A ValueError (a bad argument), and the RuntimeError
    tinygrad raises for it ("bind mismatch on ..."), so code written for either catches it."""


def forget_kept_results() -> None:
    """Drop what schedules keep for later ones (whole schedules, folded index expressions, kernels found safe), so the next
    schedule starts as the first of a process does (bench/schedule.py times each run so)."""
    from rulec.runtime.schedule import helpers, kernel_check

    helpers.forget_simplified()
    kernel_check.forget_safe()
    forget_schedules()


def _one_value_per_variable(binds: tuple[UOp, ...]) -> None:
    """A kernel is given each variable's value by name: two bindings of one name to different values
    (`x[:n=2]` and `x[:n=5]` in one kernel) cannot both hold, and running with either is silently wrong."""
    seen: dict[str, int] = {}
    for b in binds:
        name, value = b.src[0].arg[0], b.src[1].arg
        if seen.setdefault(name, value) != value:
            raise BindMismatchError(f"bind mismatch on {name}: variable {name!r} is bound to {seen[name]} and to "
                                    f"{value} in one kernel: realize the parts with different values separately")

