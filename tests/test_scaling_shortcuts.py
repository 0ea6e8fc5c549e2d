"""The shortcuts of the scheduling-speed work (docs/performance.md, "Growth factors") give what the long
way gives: walks without a tuple per node, open ranges shared with a source, and the validity of a shared
node's index handed to `index_symbolic` as True, not as an OR chain of Trues to fold."""
from __future__ import annotations

import random

import pytest

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.shape import open_ranges_of
from rulec.runtime.ir.uop import UOp
from rulec.runtime.ir.walk import run_recursive
from rulec.runtime.schedule.callbacks.rangeify import _any_valid
from rulec.runtime.schedule.helpers import INVALID, simplify_index


def _random_dag(seed: int, n: int = 60) -> list[UOp]:
    rng = random.Random(seed)
    nodes = [UOp.variable(f"v{i}", 0, 9) for i in range(4)] + [UOp.range(rng.randint(2, 5), i) for i in range(3)]
    for _ in range(n):
        a, b = rng.choice(nodes), rng.choice(nodes)
        nodes.append(a.alu(rng.choice([Ops.ADD, Ops.MUL, Ops.MAX]), b) if rng.random() < 0.8 else -a)
    return nodes


def _reference_topo(root: UOp, gate) -> list[UOp]:
    # the recursive definition: sources first, left to right, each node once; below a gated node nothing
    out: dict[UOp, None] = {}

    def visit(u: UOp) -> None:
        if u in out:
            return
        if gate is None or gate(u):
            for s in u.src:
                visit(s)
        out[u] = None

    visit(root)
    return list(out)


@pytest.mark.parametrize("seed", range(8))
def test_walks_visit_in_the_recursive_order(seed):
    nodes = _random_dag(seed)
    root = UOp.sink(*nodes[-5:])
    gate = (lambda u: u.op is not Ops.MUL) if seed % 2 else None
    assert list(root.toposort(gate)) == _reference_topo(root, gate)
    assert list(root.toposort()) == _reference_topo(root, None)

    def count(u: UOp):  # nodes at or below u, each counted once per path: a recursive walk
        total = 1
        for s in u.src:
            total += yield s
        return total

    def count_direct(u: UOp) -> int:
        return 1 + sum(count_direct(s) for s in u.src)

    assert run_recursive(count, root) == count_direct(root)


@pytest.mark.parametrize("seed", range(8))
def test_open_ranges_shared_with_a_source_equal_the_general_rule(seed):
    rng = random.Random(seed)
    nodes = _random_dag(seed)
    ranges = [u for u in nodes if u.op is Ops.RANGE]
    # close some ranges: reductions and buffers over a subset
    for u in list(nodes[-20:]):
        closed = tuple(r for r in ranges if rng.random() < 0.5)
        nodes.append(UOp(Ops.REDUCE, u.dtype, (u, *closed), Ops.ADD) if rng.random() < 0.5 else
                     UOp(Ops.BUFFERIZE, u.dtype, (u, *closed)))
        nodes.append(nodes[-1] + rng.choice(nodes))
    root = UOp.sink(*nodes[-10:])
    shared = 0
    for u in root.toposort():
        got = u.ranges
        assert got == open_ranges_of(u), u.op
        shared += any(got is s.ranges for s in u.src) and len(got) > 0
    assert shared > 0  # most nodes take a source's tuple as it is


def _indices() -> list[UOp]:
    r0, r1 = UOp.range(4, 0), UOp.range(6, 1)
    return [r0, UOp.range(1, 3, "reduce"), UOp.const(dtypes.index, 5), r0 * 6 + r1, (r0 * 6 + r1) // 3 % 2,
            UOp.range(UOp.variable("n", 1, 8), 2)]


@pytest.mark.parametrize("index", _indices())
@pytest.mark.parametrize("consumers", [2, 3])
def test_ungated_shared_index_folds_as_the_or_chain_does(index, consumers):
    # no consumer gates its read: the validity is True, and index_symbolic makes of `True.where(i, INVALID)`
    # exactly what it makes of `(False | True | ...).where(i, INVALID)`
    t = UOp.const(dtypes.bool, True)
    chain = UOp.const(dtypes.bool, False)
    for _ in range(consumers):
        chain = chain | t
    valid = _any_valid((t,) * consumers)
    assert valid is t
    assert simplify_index(valid.where(index, INVALID)) is simplify_index(chain.where(index, INVALID))


def test_gated_reads_keep_the_or_of_their_gates():
    r = UOp.range(8, 0)
    g = r < 5
    t = UOp.const(dtypes.bool, True)
    assert _any_valid((g, t)) is (UOp.const(dtypes.bool, False) | g) | t


# ------------------------------------------------------------------ children gates that would always agree

def _programs():
    import numpy as np

    from rulec import Tensor

    rng = np.random.default_rng(0)
    x, w, v = (Tensor(rng.standard_normal(s).astype(np.float32)).realize() for s in ((16, 16), (16, 16), (16, 4)))
    h = x @ w
    return {
        "relu": [(h.relu() @ v)],                          # CMPLT and WHERE read h: one index, no gate
        "gelu": [(h.gelu() @ v).sum(1)],                    # a longer elementwise funnel
        "relu-then-transposed": [h.relu() + h.T.relu()],    # the funnels end apart: gated, and buffered
        "softmax": [h.softmax(-1)],                         # a reduce reads it: gated as before
        "two-outputs": [h.relu(), h * 2],
    }


@pytest.mark.parametrize("name", ["relu", "gelu", "relu-then-transposed", "softmax", "two-outputs"])
def test_skipping_gates_that_would_agree_changes_no_kernel(name, monkeypatch):
    from rulec import Tensor
    from rulec.runtime.schedule.callbacks import children

    fast = [(item.ast, item.buffers) for item in Tensor.schedule(*_programs()[name])]
    assert children._one_index is not None
    monkeypatch.setattr(children, "_one_index", lambda *a: False)  # gate every shared node, as before
    slow = [(item.ast, item.buffers) for item in Tensor.schedule(*_programs()[name])]
    assert [a for a, _ in fast] == [a for a, _ in slow]
    assert [len(b) for _, b in fast] == [len(b) for _, b in slow]


def test_a_relu_input_is_not_gated_but_a_softmax_input_is():
    from rulec import Tensor
    from rulec.runtime.schedule.callbacks.children import ChildrenContext, find_children
    from rulec.runtime.ir.ops import Ops as O

    import numpy as np

    x = Tensor(np.ones((4, 4), np.float32)).realize()
    h = (x @ x).uop
    for out, gated in (((x @ x).relu().uop, False), ((x @ x).softmax(-1).uop, True)):
        ctx = ChildrenContext()
        find_children(UOp.sink(out), ctx)
        assert (h in ctx.children) is gated and all(u.op is not O.SINK for us in ctx.children.values() for u in us)


def test_assign_ordering_does_not_walk_below_every_kernel(monkeypatch):
    # every kernel of a chain reads the ASSIGN of the one before; only a buffer with several writers needs
    # the parents of its assigns (a walk below each kernel would be quadratic over the chain)
    import numpy as np

    from rulec import Tensor
    from rulec.runtime.engine.pipeline import run_pipeline
    from rulec.runtime.schedule.callbacks.assign import order_assigns
    from rulec.runtime.schedule.scheduler import schedule_pipeline

    x = Tensor(np.ones(16, np.float32)).realize()
    for _ in range(12):
        x = (x * 2).contiguous()
    graph, _ = run_pipeline(UOp.sink(x.uop), schedule_pipeline().without("assign ordering"))
    kernels = [u for u in graph.toposort() if u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL]
    assert len(kernels) == 12
    walked = []
    real = UOp.parents
    monkeypatch.setattr(UOp, "parents", property(lambda u: (walked.append(u), real.fget(u))[1]))
    assert order_assigns(graph) is graph
    assert [u for u in walked if u.op is Ops.ASSIGN] == []
