"""The C backend computes a tile's lanes of consecutive elements as GCC vectors (backends/vectorize.py).

Every kernel here is compiled twice, with vectors and with every lane scalar, and run on the same inputs
(with nan, infinities and -0.0 among them): the outputs must be equal bit for bit, but for the payload of a
nan (each lane does the same operations in the same order), and equal to numpy's within rounding.
"""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor
from rulec.backends.c.runner import compile_c
from rulec.backends.render import backend, kernel_name, render
from rulec.backends.vectorize import plan_vectors
from rulec.runtime.codegen.lower import lower
from rulec.runtime.ir.ops import Ops

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _run(ast, vectors: bool, inputs: list[np.ndarray]) -> list[np.ndarray]:
    bufs = [a.copy() for a in inputs]
    compile_c(kernel_name(ast), render(ast, "c", vectors=vectors))(bufs)
    return bufs


def _inputs(ast) -> list[np.ndarray]:
    """Random inputs for `ast`'s buffers, with a sprinkling of nan, infinities and -0.0."""
    k = lower(ast)
    out = []
    for g in k.globals:
        dt = np.dtype(g.dtype.base.name)
        if g.arg in k.outputs or dt.kind != "f":
            out.append(np.zeros(g.dtype.size, dt))
            continue
        a = rng.standard_normal(g.dtype.size).astype(dt)
        special = rng.random(g.dtype.size) < 0.02
        a[special] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], dt), special.sum())
        out.append(a)
    return out


def _conv_grads():
    x, w = Tensor(f32(4, 8, 12, 12), requires_grad=True), Tensor(f32(16, 8, 5, 5), requires_grad=True)
    (x.relu().conv2d(w) * Tensor(f32(4, 16, 8, 8))).sum().backward()
    return [x.grad, w.grad]


def _schedule(out):
    return Tensor.schedule(*out) if isinstance(out, list) else Tensor.schedule(out)


PROGRAMS = {
    "matmul": lambda: Tensor(f32(64, 48)) @ Tensor(f32(48, 40)),
    "linear with bias": lambda: Tensor(f32(16, 72)).linear(Tensor(f32(72, 24)), Tensor(f32(24))),
    "conv with bias and relu": lambda: Tensor(f32(2, 3, 12, 12)).conv2d(Tensor(f32(16, 3, 3, 3)), Tensor(f32(16))).relu(),
    "batched matmul then softmax": lambda: (Tensor(f32(3, 16, 8)) @ Tensor(f32(3, 8, 32))).softmax(-1),
    "matmul with a gelu fused into its loads": lambda: Tensor(f32(32, 16)).gelu() @ Tensor(f32(16, 32)),
    "padded conv (gated loads)": lambda: Tensor(f32(1, 4, 9, 9)).conv2d(Tensor(f32(8, 4, 3, 3)), padding=1),
    "matmul of a transposed operand": lambda: Tensor(f32(40, 32)).T @ Tensor(f32(40, 24)),
    "float64 matmul (not listed: scalar)": lambda: Tensor(f32(16, 16).astype(np.float64)) @ Tensor(f32(16, 16).astype(np.float64)),
    "max pool": lambda: Tensor(f32(2, 4, 16, 16)).max_pool2d(),
    "conv gradients (tiles of channels: strided stores)": lambda: _conv_grads(),
    "max over a row, with nans": lambda: Tensor(np.where(f32(32, 64) > 1.5, np.nan, f32(32, 64)).astype(np.float32)).max(1),
    "relu and its gradient": lambda: Tensor(f32(32, 16)).relu() @ Tensor(f32(16, 24)),
    "select by a comparison of two tensors": lambda: (Tensor(f32(24, 16)) @ Tensor(f32(16, 16))).maximum(Tensor(f32(24, 16))),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_vector_kernels_give_the_bits_of_scalar_ones(name):
    for item in _schedule(PROGRAMS[name]()):
        inputs = _inputs(item.ast)
        for a, b in zip(_run(item.ast, True, inputs), _run(item.ast, False, inputs)):
            _assert_same_bits(a, b, name)


def _assert_same_bits(a: np.ndarray, b: np.ndarray, name: str) -> None:
    """Equal bit for bit (-0.0 is not 0.0), but for which nan: IEEE leaves the payload and sign of a nan made
    from two nans open, and a compiler may swap the operands of a commutative op in either form."""
    if a.dtype.kind == "f":
        assert np.array_equal(np.isnan(a), np.isnan(b)), name
        a, b = np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=name)


def test_a_matmul_tile_loads_a_row_of_b_as_one_vector_and_broadcasts_a():
    a, b = f32(64, 48), f32(48, 40)
    out = Tensor(a) @ Tensor(b)
    (item,) = Tensor.schedule(out)
    src = render(item.ast, "c")
    assert "typedef float rulec_floatx8 __attribute__((vector_size(32)));" in src
    assert src.count("(*(const rulec_floatx8_u*)&data2[") == 1  # 8 columns of B: one load per reduce step
    assert "data1[" in src and "(*(const rulec_floatx8_u*)&data1[" not in src  # A's element: one scalar per row
    assert src.count("*(rulec_floatx8_u*)&data0[") == 4  # the 4 x 8 tile: four vector stores
    assert "float acc" not in src  # every accumulator is a vector register
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def _conv_ref(x, w, b):
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    ref = np.zeros((n, o, h - kh + 1, wd - kw + 1), np.float32)
    for dy in range(kh):
        for dx in range(kw):
            ref += np.einsum("bchw,oc->bohw", x[:, :, dy:dy + h - kh + 1, dx:dx + wd - kw + 1], w[:, :, dy, dx])
    return ref + b[None, :, None, None]


def test_a_relu_is_a_vector_comparison_and_a_select_of_bits():
    # relu(conv + bias): accumulators, loads, multiply-adds, the comparison (a mask) and the select are
    # vectors; the select picks bits as the scalar one does
    x, w, b = f32(2, 3, 22, 22), f32(16, 3, 3, 3), f32(16)  # rows of 20 pixels: tiles of 8 channels x 4 pixels
    out = Tensor(x).conv2d(Tensor(w), Tensor(b)).relu()
    src = render(Tensor.schedule(out)[-1].ast, "c")
    assert "rulec_floatx4 acc" in src and "float acc" not in src
    assert "typedef int rulec_intx4 " in src and "union" not in src  # no scalar select is left
    np.testing.assert_allclose(out.numpy(), np.maximum(_conv_ref(x, w, b), 0), rtol=1e-4, atol=1e-4)


def test_an_op_without_a_vector_form_stays_scalar_between_vector_ops():
    # exp2 has no vector template: its lanes are scalars, computed once the vector sum they read exists,
    # and put together again for the vector ops after them
    x, w, b = f32(2, 3, 22, 22), f32(16, 3, 3, 3), f32(16)
    out = Tensor(x).conv2d(Tensor(w), Tensor(b)).sigmoid() * 3
    src = render(Tensor.schedule(out)[-1].ast, "c")
    assert "rulec_floatx4 acc" in src and "exp2f(" in src
    np.testing.assert_allclose(out.numpy(), 3 / (1 + np.exp(-_conv_ref(x, w, b))), rtol=1e-4, atol=1e-4)


def test_a_tile_of_output_channels_is_vectors_stored_lane_by_lane():
    # the weight gradient of a convolution: its tile is 8 output channels x 4 input channels, whose outputs
    # lie 200 and 25 elements apart. The lanes are still vectors (accumulators, multiply-adds); each lane is
    # stored alone
    x, w, g = f32(4, 8, 12, 12), f32(16, 8, 5, 5), f32(4, 16, 8, 8)
    wt = Tensor(w, requires_grad=True)
    (Tensor(x).conv2d(wt) * Tensor(g)).sum().backward()
    (item,) = [it for it in Tensor.schedule(wt.grad) if "rulec_floatx8 acc" in render(it.ast, "c")]
    src = render(item.ast, "c")
    assert "float acc" not in src and src.count("[7];") >= 1 and "*(rulec_floatx8_u*)&data0" not in src
    ref = np.zeros_like(w)
    for dy in range(5):
        for dx in range(5):
            ref[:, :, dy, dx] = np.einsum("bohw,bchw->oc", g, x[:, :, dy:dy + 8, dx:dx + 8])
    np.testing.assert_allclose(wt.grad.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_a_buffer_read_and_written_by_one_kernel_is_never_packed():
    # the scheduler never makes such a kernel from a tensor program (an assign reads a copy), so one is made
    # here: a 32x32 matmul whose B is its own output. Its loads and stores of that buffer keep the program's
    # order, so none of them may be a vector access; B's row would be one otherwise
    from rulec.runtime.codegen.linearize import linearize
    from rulec.runtime.ir.uop import substitute

    (item,) = Tensor.schedule(Tensor(f32(32, 32)) @ Tensor(f32(32, 32)))
    k = lower(item.ast)
    out, _, b = k.globals
    spec = backend("c").vectors

    def packed_buffers(sink):
        plan = plan_vectors(tuple(linearize(sink)), spec)
        return {p.lanes[0].src[0].src[0].arg for p in plan.packs if p.kind in ("load", "store")}

    assert packed_buffers(k.lowered) == {0, 2}
    assert packed_buffers(substitute(k.lowered, {b: out})) == set()


@pytest.mark.parametrize("language", ["opencl", "cuda", "metal"])
def test_gpu_languages_render_no_host_vectors(language):
    (item,) = Tensor.schedule(Tensor(f32(64, 48)) @ Tensor(f32(48, 40)))
    assert "rulec_float" not in render(item.ast, language)


def test_every_rendered_step_appears_once_and_every_pack_after_its_sources():
    from rulec.backends.vectorize import Pack

    for build in PROGRAMS.values():
        for item in _schedule(build()):
            k = lower(item.ast)
            plan = plan_vectors(k.steps, backend("c").vectors)
            seen: set = set()
            numbers = [i for i in plan.order if not isinstance(i, Pack)]
            assert len(numbers) == len(set(numbers))
            lanes = {u for p in plan.packs for u in p.lanes}
            rendered = {k.steps[i].uop for i in numbers if k.steps[i].kind == "op"}
            assert rendered | lanes == {s.uop for s in k.steps if s.kind == "op"} and not rendered & lanes
            for item_ in plan.order:
                made = item_.lanes if isinstance(item_, Pack) else (k.steps[item_].uop,)
                if isinstance(item_, Pack) or k.steps[item_].kind == "op":
                    assert all(s in seen for u in made for s in u.src), "a value used before it is computed"
                seen.update(made)


def test_rulec_vectors_0_renders_every_lane_scalar(monkeypatch):
    (item,) = Tensor.schedule(Tensor(f32(64, 48)) @ Tensor(f32(48, 40)))
    assert "rulec_floatx8" in render(item.ast, "c")
    monkeypatch.setenv("RULEC_VECTORS", "0")
    assert "rulec_float" not in render(item.ast, "c") and "rulec_floatx8" in render(item.ast, "c", vectors=True)


def test_stores_may_write_one_element_unless_their_indices_differ_by_a_constant():
    # two stores to one element keep their order (a pack is stored with its last lane, and a waiting
    # store never passes another): only indices that differ by a constant are known to be apart
    from rulec.backends.vectorize import _Planner
    from rulec.runtime.ir.dtype import dtypes
    from rulec.runtime.ir.uop import UOp

    buf, other = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), arg=n) for n in (0, 1))
    r, q = UOp.range(8, 0), UOp.range(8, 1)
    one = UOp.const(dtypes.float32, 1.0)

    def store(b, idx):
        return UOp(Ops.STORE, dtypes.void, (b.index(idx), one))

    planner = _Planner((), backend("c").vectors)
    at = lambda i: store(buf, i)  # noqa: E731
    assert not planner.may_alias(at(r * 8 + 1), at(r * 8 + 2))
    assert planner.may_alias(at(r * 8 + 1), at(1 + r * 8))
    assert planner.may_alias(at(r * 8), at(q * 8))  # unknown: r may equal q
    assert not planner.may_alias(at(r * 8), store(other, r * 8))


def test_a_store_waiting_for_a_pack_is_not_passed_by_a_store_to_its_element_in_an_inner_loop():
    # made by hand (the scheduler makes no such kernel today): for r { v_k = data1[8r+k] * 2 (a pack);
    # data2[8r+k] = v_k (a store pack); data0[r] = v_0; for q { data0[r] = 1 } }. The store of v_0 waits
    # for the pack (lane 7 comes after the inner loop); the inner loop's store to the same element must not
    # run first (found by a fuzzing review: the check looked only at the inner loop's own waiting stores)
    from rulec.backends.render import _Renderer
    from rulec.runtime.codegen.linearize import Step
    from rulec.runtime.codegen.lower import LoweredKernel
    from rulec.runtime.ir.dtype import dtypes
    from rulec.runtime.ir.uop import UOp

    f = dtypes.float32
    g0, g1, g2 = (UOp(Ops.DEFINE_GLOBAL, f.ptr(16), arg=n) for n in (0, 1, 2))
    r, q = UOp.range(2, 0), UOp.range(4, 1)
    two, one = UOp.const(f, 2.0), UOp.const(f, 1.0)
    base = r * 8
    offsets = [base] + [base + k for k in range(1, 8)]
    loads = [UOp(Ops.LOAD, f, (g1.index(i),)) for i in offsets]
    values = [x * two for x in loads]
    stores = [UOp(Ops.STORE, dtypes.void, (g2.index(i), v)) for i, v in zip(offsets, values)]
    first = UOp(Ops.STORE, dtypes.void, (g0.index(r), values[0]))
    inner = UOp(Ops.STORE, dtypes.void, (g0.index(r), one))

    def lane(k):
        return [Step("op", u) for u in (loads[k].src[0], loads[k], values[k], stores[k].src[0], stores[k])]

    steps = [Step("op", u) for u in (g0, g1, g2, two, one, *{c for o in offsets for c in o.src if c.op is Ops.CONST})]
    steps += [Step("open", r), *(Step("op", o) for o in offsets), *lane(0), Step("op", first.src[0]), Step("op", first),
              Step("open", q), Step("op", inner), Step("close", q)]
    for k in range(1, 8):
        steps += lane(k)
    steps = tuple(steps + [Step("close", r)])
    kernel = LoweredKernel(None, UOp.sink(*stores, first, inner), steps, (g0, g1, g2), (), (0, 2), ())
    data = np.arange(16, dtype=np.float32) + 3
    got = {}
    for vectors in (True, False):
        src = _Renderer(backend("c"), kernel, "hand_made", vectors).run()
        bufs = [np.zeros(16, np.float32), data.copy(), np.zeros(16, np.float32)]
        compile_c("hand_made", src)(bufs)
        got[vectors] = bufs
    np.testing.assert_array_equal(got[False][0][:2], [1, 1])
    for a, b in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)
    assert "rulec_floatx8" in _Renderer(backend("c"), kernel, "hand_made", True).run()  # the pack is still made
