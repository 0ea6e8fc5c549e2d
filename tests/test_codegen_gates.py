"""Validity gates in codegen (rules/codegen/gates.yaml): a gate's conditions bound what they compare, so
the index it guards folds over those bounds, and the gate itself loses what repeats or is implied."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.codegen.helpers import implies, simplified_gate, simplified_given
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

r0, r1 = UOp.range(24, 0), UOp.range(6, 1)
a = r0 + r1 * 24                      # 0..143: the window index of a 6-tap row over 24 pixels
y = UOp.range(20, 2)


def lanes(*ranges: UOp):
    """Every assignment of the loops, as substitution maps."""
    grids = np.meshgrid(*[np.arange(r.src[0].arg) for r in ranges], indexing="ij")
    for vals in zip(*(g.ravel() for g in grids)):
        yield {r: UOp.const(dtypes.index, int(v)) for r, v in zip(ranges, vals)}


def value(u: UOp, env: dict) -> int:
    from rulec.runtime.ir.uop import substitute
    from rulec.runtime.schedule.helpers import simplify_index

    out = simplify_index(substitute(u, env))
    assert out.op is Ops.CONST, out
    return out.arg


def test_an_index_folds_over_the_bounds_its_gate_sets_and_reads_the_same_where_the_gate_holds():
    gate = (a < 125) & ((a % 25) < 20)
    idx = ((a // 125) + y) * 20 + (a % 25) // 20 + (a % 25) % 20
    got = simplified_given(idx, gate)
    assert got is not idx
    ops = [u.op for u in got.toposort()]
    assert ops.count(Ops.IDIV) + ops.count(Ops.MOD) == 1, got  # only a % 25 is left
    for env in lanes(r0, r1, y):
        if value(gate, env):
            assert value(got, env) == value(idx, env)


def test_an_index_its_gate_does_not_narrow_is_kept():
    idx = (a // 7) * 3
    assert simplified_given(idx, r0 < 24) is idx  # r0 < 24 holds anyway: no narrower bound
    assert simplified_given(idx, a < 144) is idx


def test_a_gate_loses_repeated_and_implied_conditions_and_passes_the_same_lanes():
    inner = (((a // 125) + r0) % 25) < 20   # a // 125 is 0 where a < 125
    gate = (((a < 125) & (r0 < 23)) & (a < 125)) & inner
    got = simplified_gate(gate)
    assert got is not gate
    conds = [u for u in got.toposort() if u.op is Ops.CMPLT]
    assert len(conds) == 3 and not any(u.op is Ops.IDIV for u in got.toposort())
    for env in lanes(r0, r1):
        assert value(got, env) == value(gate, env)


def test_a_gate_that_its_other_conditions_decide_becomes_a_constant():
    assert simplified_gate((r0 < 10) & (r0 < 20)).op is Ops.CMPLT          # r0 < 20 follows from r0 < 10
    never = simplified_gate((r0 < 10) & ((r0 + 15) < 20) & (r1 < 3))
    assert all(value(never, env) == value((r0 < 10) & ((r0 + 15) < 20) & (r1 < 3), env) for env in lanes(r0, r1))


def test_a_load_gate_implies_a_condition_that_follows_from_its_bounds():
    assert implies((a < 125) & (r1 < 3), a < 125)
    assert implies(a < 100, a < 125)          # not one of its conditions, but it follows
    assert not implies(a < 125, a < 100)


def test_a_convolution_input_gradient_indexes_without_the_window_arithmetic_and_shares_its_loads():
    # x.grad of a 5x5 convolution reads the incoming gradient through a padded 6x6 window: every lane's
    # index was a chain of // and % by 125, 25, 20, 5 and 32, and those chains also made each load read the
    # input-channel loop, so the upcast tile took batch by pixel lanes (32 + 8 loads per step). Folded over
    # the gate, the index reads the pixel and the window only, and the tile is batch by channel (4 + 8).
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 32, 24, 24)).astype(np.float32)
    ws = rng.standard_normal((32, 32, 5, 5)).astype(np.float32)
    gs = rng.standard_normal((8, 32, 20, 20)).astype(np.float32)
    x, w = Tensor(xs, requires_grad=True), Tensor(ws, requires_grad=True)
    (x.conv2d(w) * Tensor(gs)).sum().backward()
    (item,) = Tensor.schedule(x.grad)
    src = item.render("c")
    divmods = sum(src.count(f"{op}{n})") for op in "/%" for n in (5, 8, 20, 25, 32, 125))
    assert "/125)" not in src and divmods <= 8, src
    assert src.count("data1[") + src.count("data2[") <= 12, src
    want = np.zeros_like(xs)
    for dy in range(5):
        for dx in range(5):
            want[:, :, dy:dy + 20, dx:dx + 20] += np.einsum("bohw,oi->bihw", gs, ws[:, :, dy, dx])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_padded_and_strided_windows_equal_numpy_with_folded_gates(device):
    # pooling over padding and a strided convolution: gates with several comparisons per index
    rng = np.random.default_rng(1)
    img = rng.standard_normal((2, 3, 11, 9)).astype(np.float32)
    wt = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    t = Tensor(img, device=device, requires_grad=True)
    out = t.pad((2, 1, 1, 2)).conv2d(Tensor(wt, device=device), stride=2, padding=1).relu().sum() \
        + t.avg_pool2d(kernel_size=(3, 2), stride=(2, 3), padding=1).square().sum()
    out.backward()
    import numpy.lib.stride_tricks as st

    def ref(img):
        p = np.pad(img, ((0, 0), (0, 0), (1, 2), (2, 1)))
        p = np.pad(p, ((0, 0), (0, 0), (1, 1), (1, 1)))
        win = st.sliding_window_view(p, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
        conv = np.einsum("bchwij,ocij->bohw", win, wt)
        q = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
        pool = st.sliding_window_view(q, (3, 2), axis=(2, 3))[:, :, ::2, ::3].mean(axis=(-1, -2))
        return np.maximum(conv, 0).sum() + np.square(pool).sum()

    np.testing.assert_allclose(out.numpy(), ref(img.astype(np.float64)), rtol=1e-4)
    eps, g = 1e-3, t.grad.numpy()
    for pos in [(0, 0, 0, 0), (1, 2, 5, 4), (0, 1, 10, 8), (1, 0, 3, 7)]:
        hi, lo = img.astype(np.float64), img.astype(np.float64)
        hi = hi.copy(); lo = lo.copy()
        hi[pos] += eps; lo[pos] -= eps
        np.testing.assert_allclose(g[pos], (ref(hi) - ref(lo)) / (2 * eps), rtol=2e-2, atol=2e-2)
