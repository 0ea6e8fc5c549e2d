"""The rules no ordinary tensor program of the corpus reaches, each run on a small graph built to need it,
with its result checked: a corpus for `rulec stats --fail-on-dead` (and a test: tests/test_rare_rules.py
runs this file). Each case rewrites its graph with the rule set that holds the rule, as the pipeline
stage does, and checks that the rule fired and what it made.

Graphs are built with the Tensor API where one exists (its graphs are what the scheduler receives:
this skips realize()'s own treatment of empty tensors), and from UOps for kernel-level rules.
"""
import numpy as np

import rulec
from rulec import Tensor
from rulec.runtime.engine.trace import active_trace, tracing
from rulec.runtime.interpret.lazy_eval import evaluate
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule.callbacks.rangeify import INVALID, BufferizeOpts

f32, idx = dtypes.float32, dtypes.index
A = np.arange(24, dtype=np.float32).reshape(4, 6)
cases = 0


def check(ruleset: str, rule: str, graph: UOp, expect) -> UOp:
    """Rewrite `graph` with `ruleset`; `rule` must fire, and `expect(result)` hold (or result equal it)."""
    global cases
    out, fired = _rewrite(rulec.load(ruleset), graph)
    assert rule in fired, f"{ruleset}/{rule} did not fire on {graph}; fired: {sorted(fired)}"
    ok = expect(out) if callable(expect) else out is expect
    assert ok, f"{ruleset}/{rule}: {graph}\n  became {out}"
    cases += 1
    return out


def _rewrite(rs, graph: UOp) -> tuple[UOp, set[str]]:
    """The rewrite, and the rules that fired in it. Counted on the trace already active when there is one
    (`rulec stats` running this program: a trace of our own would hide the rewrites from it)."""
    outer = active_trace()
    if outer is None:
        with tracing() as t:
            out = rs.rewrite(graph)
        return out, {i.name for i, st in t.stats.items() if st.hits}
    before = {i: st.hits for i, st in outer.stats.items()}
    out = rs.rewrite(graph)
    return out, {i.name for i, st in outer.stats.items() if st.hits > before.get(i, 0)}


def realized(a):
    return Tensor(a).realize()


# ------------------------------------------------------------------ tensor graphs (earliest rewrites)
c = UOp.const(f32, 2.0)
check("earliest_rewrites", "drop-detach-like", UOp(Ops.DETACH, f32, (c,)), c)
check("earliest_rewrites", "drop-detach-like", UOp(Ops.CONTIGUOUS_BACKWARD, f32, (c,)), c)

# (the frontend folds a sum over an empty axis itself; the scheduler's rule covers graphs made otherwise)
empty_sum = UOp(Ops.REDUCE_AXIS, f32, (Tensor.empty(0, 4).uop,), (Ops.ADD, (0,)))
check("earliest_rewrites", "reduce-of-empty", empty_sum,
      lambda out: out.shape == (1, 4) and (evaluate(out) == 0).all())
empty_add = Tensor.empty(0, 3) + 1
check("earliest_rewrites", "empty-is-const", empty_add.uop, lambda out: out.shape == (0, 3) and out.base.op is Ops.CONST)

x = realized(A)
copied = x.reshape(6, 4).to("PYTHON")  # an untagged copy of a view: the view moves after the copy
check("earliest_rewrites", "copy-after-reshape", copied.uop,
      lambda out: out.op is Ops.RESHAPE and out.src[0].op is Ops.COPY and (evaluate(out) == A.reshape(6, 4)).all())
check("earliest_rewrites", "copy-after-shrink", x[1:3].to("PYTHON").uop,
      lambda out: out.op is Ops.SHRINK and out.base.op is Ops.COPY and (evaluate(out) == A[1:3]).all())

# a CHILD of a CHILDREN node left with no other child is its source again
shared = (x + 1).uop
check("rangeify", "unused-child", UOp(Ops.CHILD, f32, (UOp(Ops.CHILDREN, f32, (shared,)),)), shared)

# ------------------------------------------------------------------ index arithmetic on gated indices
r = UOp.range(8, 0)
valid = r < 5
gated = valid.where(r, INVALID)
y = UOp.variable("y", 0, 10)
check("lift_invalid", "lift-invalid-right", y - gated,
      lambda out: out.op is Ops.WHERE and out.src[0] is valid and out.src[2] is INVALID and out.src[1] is y - r)
check("lift_invalid", "lift-invalid-unary", -gated,
      lambda out: out.op is Ops.WHERE and out.src[1] is -r and out.src[2] is INVALID)
check("lift_invalid", "gated-compare-left", gated < y, lambda out: out is (valid & (r < y)))
check("lift_invalid", "gated-compare-right", y < gated, lambda out: out is (valid & (y < r)))

# a float16 sum of one value over more lanes than float16 counts (70000 is inf there): the product in float32
half = UOp(Ops.REDUCE, dtypes.float16, (UOp.const(dtypes.float16, 1e-4), UOp.range(70000, 0, "reduce")), Ops.ADD)
check("reduce_collapse", "reduce-of-invariant-half", half,
      lambda out: out.op is Ops.CAST and out.dtype == dtypes.float16 and out.src[0].op is Ops.MUL
      and out.src[0].dtype == dtypes.float32)

# ------------------------------------------------------------------ buffers read back at their own ranges
r0, r1 = UOp.range(4, 0), UOp.range(6, 1)
inner = (x + 1).uop  # (an elementwise node: no rule of the set reaches through it)
own = UOp(Ops.BUFFERIZE, f32, (inner.index(r0, r1), r0, r1), BufferizeOpts())
check("remove_costly_buffers", "bufferize-of-own-index", own, lambda out: out.replace(tag=None) is inner)
part = UOp(Ops.BUFFERIZE, f32, (inner.index(UOp.range(3, 0), r1), UOp.range(3, 0), r1), BufferizeOpts())
check("remove_costly_buffers", "bufferize-of-own-index-part", part,
      lambda out: out.op is Ops.SHRINK and out.arg == ((0, 3), (0, 6)) and out.src[0].replace(tag=None) is inner)

# a buffer of a constant, and a copy of one: the earliest rewrites compute a copy of constants on its
# target device, so these meet only constants that the stages after rangeify fold out of a value
cpu1 = UOp(Ops.DEVICE, arg="CPU:1")
two = UOp.const(f32, 2.0, (UOp(Ops.DEVICE, arg="CPU"),))
check("remove_costly_buffers", "no-buffer-for-const", UOp(Ops.BUFFERIZE, f32, (two, r0, r1), BufferizeOpts()),
      lambda out: out.shape == (4, 6) and out.base is two and (evaluate(out) == 2.0).all())
check("remove_costly_buffers", "copy-of-const", UOp(Ops.COPY, f32, (two, cpu1)),
      lambda out: out.op is Ops.CONST and out.arg == 2.0 and not out.src)

# ------------------------------------------------------------------ kernels
device = UOp(Ops.DEVICE, arg="CPU")
check("kernel_globals", "strip-const-sources", UOp.const(f32, 1.5, (device,)), UOp.const(f32, 1.5))
glob = UOp(Ops.DEFINE_GLOBAL, f32.ptr(6), (), 0)
value = UOp.const(f32, 1.0)
store = UOp(Ops.STORE, dtypes.void, (glob.index(UOp.range(6, 0)), value), arg=7)
check("kernel_codegen", "strip-store-arg", store, store.replace(arg=None))

# ------------------------------------------------------------------ lowering
load = UOp(Ops.LOAD, f32, (glob.index(r),))
check("reduce_to_accumulator", "reduce-over-nothing", UOp(Ops.REDUCE, f32, (load,), Ops.ADD), load)
not_a_loop = UOp.const(idx, 0)
reduce = UOp(Ops.REDUCE, f32, (load, r, not_a_loop), Ops.ADD)
check("end_cleanup", "reduce-drops-non-loops", reduce, lambda out: out.op is not Ops.REDUCE or len(out.src) == 2)
never = UOp(Ops.LOAD, f32, (glob.index(INVALID),))
check("kernel_memory", "load-never-valid", never, UOp.const(f32, 0.0))
check("kernel_memory", "store-never-valid", UOp(Ops.STORE, dtypes.void, (glob.index(INVALID), value)),
      lambda out: out.op is Ops.NOOP)
print(f"{cases} rare-rule cases rewrite as expected")
