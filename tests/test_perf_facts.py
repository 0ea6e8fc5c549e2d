"""The scheduler's shortcuts agree with the slow paths they replace (no timing here).

Reshape indices built directly must be exactly what folding through the `symbolic` rules gives; the op
mask and the cached open ranges must equal a walk of the subgraph; substituting ranges with the walk
pruned to where they are open must equal the full substitution.
"""
from __future__ import annotations

import itertools
import math

import pytest

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import substitute
from rulec.runtime.schedule.helpers import (_flatten_indices, _folded, _merge_split_indices, _squeeze_indices,
                                            reshape_indices, substitute_all)
from rulec.runtime.ir.uop import UOp, op_mask


def _shapes(total: int, max_dims: int = 3) -> list[tuple[int, ...]]:
    """Every shape of `total` elements with at most `max_dims` dims, size-1 dims included."""
    out = set()
    for n in range(1, max_dims + 1):
        for dims in itertools.product([d for d in range(1, total + 1) if total % d == 0], repeat=n):
            if math.prod(dims) == total:
                out.add(dims)
    return sorted(out)


def _index_choices(shape: tuple[int, ...], start: int) -> list[tuple[UOp, ...]]:
    """Indices a reshape is read with: a range of each dim's own size, or 0 / a one-iteration range
    on size-1 dims, or 0 on one dim."""
    ranges = [UOp.range(size, start + k) for k, size in enumerate(shape)]
    zero = UOp.const(dtypes.index, 0)
    choices = [tuple(ranges), tuple(zero if s == 1 else r for s, r in zip(shape, ranges))]
    choices += [tuple(zero if j == k else r for j, r in enumerate(ranges)) for k in range(len(shape))]
    return choices


@pytest.mark.parametrize("total", [1, 4, 6, 12])
def test_reshape_indices_built_directly_equal_the_folded_ones(total):
    taken = 0
    for out_shape in _shapes(total):
        for in_shape in _shapes(total):
            for idxs in _index_choices(out_shape, 100):
                for direct in (_merge_split_indices, _flatten_indices):
                    got = direct(idxs, out_shape, in_shape)
                    if got is not None:
                        taken += 1
                        assert tuple(got) == tuple(_folded(idxs, out_shape, in_shape)), (out_shape, in_shape, idxs)
                assert tuple(reshape_indices(idxs, out_shape, in_shape)) == tuple(_folded(idxs, out_shape, in_shape))
    assert taken > 0 or total == 1


def _expression_indices(size: int, start: int) -> list[UOp]:
    """Index expressions that stay in a dim of `size`, in the form merges and splits above a reshape leave
    them (the rules' normal form): a division and a remainder of a longer range, and the merge of two ranges
    (inner range first)."""
    out = [UOp.range(size, start)]
    if size > 1:
        out += [UOp.range(size * 3, start + 1) // 3, UOp.range(size + 2, start + 2) % size]
        for a in range(2, size):
            if size % a == 0:
                out.append(UOp.range(size // a, start + 4) + UOp.range(a, start + 3) * (size // a))
    return out


def _split_digits(shape: tuple[int, ...]) -> list[tuple[UOp, ...]]:
    """Indices where one range was split over every dim of size > 1 (a reshape above split it): its digits."""
    sizes = [d for d in shape if d > 1]
    r, out, stride = UOp.range(math.prod(sizes), 90), [], math.prod(sizes)
    for d in shape:
        if d == 1:
            out.append(UOp.const(dtypes.index, 0))
            continue
        stride //= d
        digit = r // stride if stride > 1 else r
        out.append(digit % d if d * stride < r.src[0].arg else digit)
    return [tuple(out)] if len(sizes) > 1 else []


@pytest.mark.parametrize("total", [4, 6, 12])
def test_reshape_of_expression_indices_built_directly_equals_the_folded_one(total):
    taken = {_squeeze_indices: 0, _flatten_indices: 0}
    for out_shape in _shapes(total, 4):
        choices = [_expression_indices(size, 10 * k) if size > 1 else [UOp.const(dtypes.index, 0)]
                   for k, size in enumerate(out_shape)]
        for idxs in [*itertools.product(*choices), *_split_digits(out_shape)]:
            for in_shape in _shapes(total, 4):
                for direct in taken:
                    got = direct(idxs, out_shape, in_shape)
                    if got is not None:
                        taken[direct] += 1
                        assert tuple(got) == tuple(_folded(idxs, out_shape, in_shape)), (out_shape, in_shape, idxs)
    assert all(taken.values()), taken


def test_an_index_the_rules_would_rewrite_takes_the_folded_path():
    r, r2 = UOp.range(6, 0), UOp.range(4, 1)
    spans_more = (r // 2, r2)  # r // 2 is 0..2: more than a dim of 2
    not_inner_first = (r2 * 6 + r, UOp.range(5, 2))  # a merge with its outer range first
    split_pair = (r // 3, r % 3)  # two digits of one range: their flat sum folds back to it
    cases = [(spans_more, (2, 4), (2, 1, 4)), (spans_more, (2, 4), (8,)), (not_inner_first, (24, 5), (24, 1, 5)),
             (not_inner_first, (24, 5), (120,)), (split_pair, (2, 3), (6,))]
    for idxs, out_shape, in_shape in cases:
        assert _squeeze_indices(idxs, out_shape, in_shape) is None
        assert _flatten_indices(idxs, out_shape, in_shape) is None
        assert reshape_indices(idxs, out_shape, in_shape) == _folded(idxs, out_shape, in_shape)


def test_reshape_of_an_expression_index_takes_the_folded_path():
    r0, r1 = UOp.range(4, 0), UOp.range(8, 1)
    idxs = (r0 + 1, r1)  # a shifted index (a shrink above): not plain, so no shortcut
    assert _merge_split_indices(idxs, (4, 8), (32,)) is None and _flatten_indices(idxs, (4, 8), (32,)) is None
    assert reshape_indices(idxs, (4, 8), (32,)) == _folded(idxs, (4, 8), (32,))


def _graph() -> tuple[UOp, list[UOp]]:
    rs = [UOp.range(4, k) for k in range(4)]
    buf = UOp(Ops.BUFFER, dtypes.float32, (), 16)
    inner = UOp(Ops.INDEX, dtypes.float32, (buf, rs[0] * 4 + rs[1]))
    red = UOp(Ops.REDUCE, dtypes.float32, (inner, rs[1]), Ops.ADD)
    body = red + UOp(Ops.INDEX, dtypes.float32, (buf, rs[2]))
    store = UOp(Ops.BUFFERIZE, dtypes.float32, (body, rs[0], rs[2]))
    top = UOp(Ops.INDEX, dtypes.float32, (store, rs[3], rs[3])) * 2.0
    return top, rs


def _walk_ranges(u: UOp) -> set[UOp]:
    """Open ranges by a fresh walk (what UOp.ranges caches)."""
    memo: dict[UOp, set[UOp]] = {}
    for n in u.toposort():
        acc = set().union(*(memo[s] for s in n.src)) if n.src else set()
        if n.op in (Ops.REDUCE, Ops.BUFFERIZE, Ops.END):
            acc -= set(n.src[1:])
        elif n.op is Ops.STORE:
            acc -= set(n.src[2:])
        if n.op is Ops.RANGE:
            acc.add(n)
        memo[n] = acc
    return memo[u]


def test_cached_facts_equal_a_walk():
    top, rs = _graph()
    for u in top.toposort():
        assert set(u.ranges) == _walk_ranges(u)
        ops = {n.op for n in u.toposort()}
        for op in (Ops.RANGE, Ops.REDUCE, Ops.BUFFER, Ops.BUFFERIZE, Ops.ASSIGN, Ops.MUL):
            assert u.has_op(op_mask(op)) == (op in ops)
    assert set(top.ranges) == {rs[3]}


def test_substituting_ranges_prunes_nothing_it_needs():
    # as inline-cheap-buffer calls it: a BUFFERIZE's ranges, substituted into its source, where they are open
    top, rs = _graph()
    bufferize = top.src[0].src[0]
    body = bufferize.src[0]
    assert set(body.ranges) == set(bufferize.src[1:])
    new = (UOp.const(dtypes.index, 1), UOp.range(4, 9))
    for old in [(rs[0], rs[2]), (rs[0],), (rs[2],), (rs[2], rs[0])]:
        got = substitute_all(body, old, new[:len(old)])
        assert got is substitute(body, dict(zip(old, new))) and got is not body


def _bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "schedule.py"
    spec = importlib.util.spec_from_file_location("bench_schedule", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_programs_compute_what_numpy_computes():
    # the scheduling benchmark's three families, small: run (schedule, then the reference interpreter)
    # against a direct numpy evaluation of the same graph
    import numpy as np

    from rulec import Tensor

    bench = _bench()
    rng = np.random.default_rng(1)
    f = lambda *s: Tensor(rng.standard_normal(s).astype(np.float32) * 0.3)  # noqa: E731
    D = 16
    mask = Tensor(np.tril(np.ones((8, 8), dtype=bool)))
    blocks = [f(D, D), f(D, D), f(D, D), f(D, D), f(D, 4 * D), f(4 * D, D)] * 2
    cases = [bench.mlp(Tensor, f(4, 12), f(12, 8), f(8), f(8, 8), f(8), f(8, 3), f(3)),
             bench.transformer(Tensor, f(1, 8, D), mask, *blocks),
             bench.chain(Tensor, f(8, 8), f(8, 8), 60)]
    for outs in cases:
        want = outs[0].lazy_numpy()
        np.testing.assert_allclose(outs[0].numpy(), want, rtol=1e-4, atol=1e-5)


def test_a_second_schedule_of_a_training_step_folds_no_index_again_and_schedules_the_same_kernels(monkeypatch):
    # each step of a training loop builds the same graph: simplify_index keeps its results (by matcher and
    # expression), so a second schedule rewrites no index expression, and its kernels are the first's (whole
    # schedules are not kept here: each step runs the pipeline)
    import numpy as np

    from rulec import Tensor
    from rulec.runtime.schedule import helpers, schedule_cache
    from rulec.runtime.ir.uop import untagged

    monkeypatch.setattr(schedule_cache, "ENABLED", False)

    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3, 12, 12)).astype(np.float32)).realize()
    w = Tensor(rng.standard_normal((4, 3, 5, 5)).astype(np.float32), requires_grad=True).realize()

    def step():
        w.grad = None
        x.conv2d(w).relu().reshape(2, -1).sum().backward()
        return [untagged(it.ast) for it in Tensor.schedule(w.grad)]

    monkeypatch.setattr(helpers, "_simplified", {})
    real, folds = helpers.graph_rewrite, []
    monkeypatch.setattr(helpers, "graph_rewrite", lambda u, m, **kw: folds.append(u) or real(u, m, **kw))
    first = step()
    assert folds and len(helpers._simplified) == len(set(folds))
    n = len(folds)
    assert step() == first and len(folds) == n
    monkeypatch.setattr(helpers, "_simplified", {})   # without the kept results: the same kernels, refolded
    assert step() == first and len(folds) == 2 * n
