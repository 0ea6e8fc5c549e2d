"""Kernel codegen: rules/codegen/ lowering, Jinja rendering for four languages, and running on devices.

Every program of the kernel-count corpus (tests/test_schedule_counts.py) runs on CPU (compiled C), CL
(OpenCL, PoCL here) and PYTHON (the reference interpreter) with results equal to numpy; its kernels render
for CUDA (PTX that ptxas accepts) and Metal (the clang check against the stand-in metal_stdlib).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rulec import Tensor
from rulec.backends.device import compile_kernel, run_kernel
from rulec.backends.errors import DeviceUnavailable, KernelCompileError
from rulec.backends.render import Backend, RenderError, backend, render
from rulec.runtime.codegen.lower import lower
from rulec.runtime.device import Device, canonical
from rulec.runtime.ir.ops import Ops
from rulec.runtime.tensor import realize as realize_mod
from opencl_probe import CL
from test_schedule_counts import PROGRAMS, T





def _run_on(device: str, name, build, ref, inputs):
    saved = Device.DEFAULT
    Device.DEFAULT = device  # new tensors live on the default device, and their kernels run there
    try:
        tensors = [T(a) for a in inputs]
        outs = build(*tensors)
        items = Tensor.schedule(*outs)
        assert all(it.device == device for it in items), [it.device for it in items]
        Tensor.realize(*outs)
    finally:
        Device.DEFAULT = saved
    for got, want in zip(outs, ref(*inputs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=f"{name} on {device}")
    return items


@pytest.mark.parametrize("device", ["CPU", "PYTHON", CL])
@pytest.mark.parametrize("name,build,ref,inputs,count", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_programs_equal_numpy_on_each_device(device, name, build, ref, inputs, count):
    _run_on(device, name, build, ref, inputs)


@pytest.mark.parametrize("device", ["CPU", "PYTHON", CL])
def test_bool_buffers_in_and_out_on_each_device(device):
    # OpenCL stores bools as uchar: the call check refused every bool array ("must be uint8, got bool")
    x = np.array([1.0, np.nan, -2.0, np.inf, 0.0], np.float32)
    mask = np.array([True, False, True, True, False])
    t, m = Tensor(x, device=device), Tensor(mask, device=device).realize()
    np.testing.assert_array_equal((t > 0).numpy(), x > 0)
    np.testing.assert_array_equal(t.isnan().numpy(), np.isnan(x))
    np.testing.assert_array_equal(((t < 1) & m).numpy(), (x < 1) & mask)
    np.testing.assert_array_equal(m.where(t, 5.0).numpy(), np.where(mask, x, 5.0))


def _kernels_of_corpus():
    for name, build, _, inputs, _ in PROGRAMS:
        for k, item in enumerate(Tensor.schedule(*build(*[T(a) for a in inputs]))):
            yield f"{name}#{k}", item


@pytest.mark.skipif(shutil.which("ptxas") is None and shutil.which("nvcc") is None, reason="no CUDA toolchain")
def test_corpus_renders_to_cuda_that_ptxas_accepts():
    from rulec.backends.cuda.runner import compile_cuda

    n = 0
    for label, item in _kernels_of_corpus():
        ptx = compile_cuda(f"k{n}", item.render("cuda").replace(f" {_name(item)}(", f" k{n}("))
        assert ".entry" in ptx, label
        n += 1
    assert n > 20


@pytest.mark.skipif(shutil.which("clang") is None, reason="no clang for the Metal check")
def test_corpus_renders_to_metal_that_passes_the_check():
    from rulec.backends.metal.check import check_metal

    n = 0
    for label, item in _kernels_of_corpus():
        check_metal(_name(item), item.render("metal"))
        n += 1
    assert n > 20


def _name(item) -> str:
    from rulec.backends.render import kernel_name

    return kernel_name(item.ast)


def _reduce_item():
    a = T(np.arange(12, dtype=np.float32).reshape(3, 4))
    return Tensor.schedule((a.pad(((1, 0), (0, 1))) * 2).sum(1))[0]


def test_every_render_is_a_complete_translation_unit_with_the_kernel():
    item = _reduce_item()
    for lang, marker in [("c", "void "), ("opencl", "__kernel void "), ("cuda", 'extern "C" __global__ void '),
                         ("metal", "kernel void ")]:
        src = item.render(lang)
        assert marker + _name(item) + "(" in src, lang


def test_lowering_leaves_no_reduce_and_gates_the_padding():
    k = lower(_reduce_item().ast, "cpu")
    ops = {u.op for u in k.lowered.toposort()}
    assert Ops.REDUCE not in ops and Ops.INVALID not in ops and Ops.DEFINE_REG in ops
    gated = [u for u in k.lowered.toposort() if u.op is Ops.INDEX and len(u.src) == 3]
    assert gated, "the padded read is a gated INDEX"
    src = _reduce_item().render("c")
    assert "?data1[" in src  # a gated load reads memory only where its gate holds


def test_gpu_targets_turn_outer_loops_into_bounds_checked_thread_ids():
    a = T(np.ones((5, 7), np.float32))
    item = Tensor.schedule((a * 2).contiguous())[0]
    k = lower(item.ast, "gpu")
    assert k.thread_dims and all(n > 0 for _, n in k.thread_dims)
    assert "get_global_id(0)" in item.render("opencl") and "if (g0 >= " in item.render("opencl")
    assert "blockIdx.x*blockDim.x+threadIdx.x" in item.render("cuda")
    assert "[[thread_position_in_grid]]" in item.render("metal") and "device float*" in item.render("metal")
    assert "for (" in item.render("c") and "g0" not in item.render("c")


def test_cuda_and_metal_render_and_compile_but_do_not_run_here():
    item = _reduce_item()
    arrays = [np.zeros(4, np.float32), np.arange(12, dtype=np.float32)]
    if shutil.which("clang"):
        with pytest.raises(DeviceUnavailable, match="METAL"):
            run_kernel(item.ast, arrays, {}, "METAL")
    if shutil.which("nvcc") or shutil.which("ptxas"):
        from rulec.backends.cuda.runner import driver_present

        if not driver_present():
            with pytest.raises(DeviceUnavailable, match="CUDA"):
                run_kernel(item.ast, arrays, {}, "CUDA")


def test_metal_refuses_float64_with_a_clear_error():
    a = T(np.ones(4, np.float64))
    item = Tensor.schedule((a * 2).contiguous())[0]
    with pytest.raises(RenderError, match="float64"):
        item.render("metal")


def test_devices_as_tinygrad_names_them(monkeypatch):
    assert canonical("cl") == "CL" and canonical("CPU:0") == "CPU" and canonical("clang") == "CPU"
    with pytest.raises(ValueError, match="unknown device 'TPU'"):
        canonical("TPU")
    out = subprocess.run([sys.executable, "-c", "from rulec import Device; print(Device.DEFAULT)"],
                         env={**os.environ, "DEV": "PYTHON"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PYTHON"


def test_a_failing_compile_names_the_kernel_and_shows_its_source(tmp_path):
    # a backend whose ADD template is broken: the C compiler rejects the kernel
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "backend.yaml").write_text("name: broken\nextends: c\nops:\n  ADD: '({{a}} +* {{b}})'\n")
    b = Backend.load(folder)
    a = T(np.ones(4, np.float32))
    item = Tensor.schedule((a + a).contiguous())[0]
    src = b.render(lower(item.ast, b.target), "broken_add")
    from rulec.backends.c.runner import compile_c

    with pytest.raises(KernelCompileError) as e:
        compile_c("broken_add", src)
    assert "broken_add" in str(e.value) and "   1 | #include" in str(e.value)


def test_a_new_backend_is_a_folder_of_templates_and_yaml(tmp_path):
    # a render-only backend: its own skeleton and a changed type name, everything else from C
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "backend.yaml").write_text(textwrap.dedent("""\
        name: toy
        extends: c
        template: toy.j2
        types: {float32: real}
        literals: {float32: "real({{v}})"}
        """))
    (folder / "toy.j2").write_text("// toy kernel\nproc {{ name }}({{ params|map(attribute='name')|join(', ') }})"
                                   " {\n{% for line in body %}{{ line }}\n{% endfor %}}\n")
    b = Backend.load(folder)
    a = T(np.ones(4, np.float32))
    item = Tensor.schedule((a * 3).contiguous())[0]
    src = b.render(lower(item.ast, b.target), "triple")
    assert src.startswith("// toy kernel\nproc triple(data0, data1)") and "real(3.0)" in src and "real " in src


def test_compiled_kernels_are_cached_per_process():
    item = _reduce_item()
    assert compile_kernel(item.ast, "CPU").program is compile_kernel(item.ast, "CPU").program


def _record_devices(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = realize_mod.run_kernel
    monkeypatch.setattr(realize_mod, "run_kernel", lambda ast, arrays, vals, dev: (seen.append(dev),
                                                                                   real(ast, arrays, vals, dev)))
    return seen


def test_kernels_run_on_the_device_of_their_tensors(monkeypatch):
    seen = _record_devices(monkeypatch)
    a = T(np.arange(4, dtype=np.float32))
    assert a.device == Device.DEFAULT
    assert (a + 1).numpy().tolist() == [1, 2, 3, 4]
    assert seen == [Device.DEFAULT]
    p = Tensor(np.arange(4, dtype=np.float32), device="python")
    assert p.device == "PYTHON" and (p * 3).device == "PYTHON"
    seen.clear()
    assert (p * 3).numpy().tolist() == [0, 3, 6, 9] and seen == ["PYTHON"]


def test_to_is_a_copy_in_the_schedule_and_mixing_devices_is_an_error(monkeypatch):
    seen = _record_devices(monkeypatch)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = Tensor(x, device="PYTHON")
    b = (a * 2).to("CPU")
    assert b.device == "CPU" and a.to("PYTHON") is a
    items = Tensor.schedule(b)
    assert [it.device for it in items] == ["PYTHON", "CPU"]
    assert items[-1].ast.op is Ops.STORE and items[-1].ast.src[1].op is Ops.COPY
    np.testing.assert_array_equal(b.numpy(), x * 2)
    assert seen == ["PYTHON"]  # the copy is a copy of memory, not a kernel
    with pytest.raises(ValueError, match=r"different devices \(PYTHON \(2, 3\), CPU \(2, 3\)\)"):
        a + Tensor(x)
    c = Tensor(x, device="PYTHON").permute(1, 0).to("cpu")
    np.testing.assert_array_equal(c.numpy(), x.T)
    with pytest.raises(ValueError, match="unknown device 'TPU'"):
        Tensor(x, device="TPU")


@pytest.mark.parametrize("device", ["CPU", CL])
def test_a_symbolic_shape_compiles_once_and_runs_for_several_values(device):
    from rulec.backends import device as dev_mod
    from rulec.runtime.ir.uop import UOp

    data = np.arange(40, dtype=np.float32).reshape(10, 4)
    saved = Device.DEFAULT
    Device.DEFAULT = device
    try:
        src = T(data)
        before = None
        for n in (2, 7, 10):
            v = UOp.variable("n", 1, 10).bind(n)
            out = (src.shrink(((0, v), None)) * 2).sum(0)
            np.testing.assert_allclose(out.numpy(), (data[:n] * 2).sum(0))
            compiled = {k for k in dev_mod._compiled if k[1] == device}
            if before is None:
                before = compiled
            assert compiled == before, "a new value of n compiled a new kernel"
        src_text = Tensor.schedule((src.shrink(((0, UOp.variable("n", 1, 10).bind(3)), None)) * 2).sum(0))[0].render("c")
        assert "int n" in src_text  # the variable is a kernel parameter
    finally:
        Device.DEFAULT = saved


def _kernel_with_regroupable_index():
    from rulec.runtime.ir.dtype import dtypes
    from rulec.runtime.ir.uop import UOp

    g0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), (), 0)
    g1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), (), 1)
    r0, r1 = UOp.range(8, 0), UOp.range(8, 1)
    read = UOp(Ops.INDEX, g1.dtype, (g1, (r0 * 4 + r1 * 4) % 64))  # the greedy rules leave 4 ops here
    value = UOp(Ops.LOAD, dtypes.float32, (read,))
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, g0.dtype, (g0, r0 * 8 + r1)), value, r0, r1))
    return UOp.sink(store)


def test_egglog_extracts_index_arithmetic_with_fewer_ops(monkeypatch):
    from rulec.runtime.codegen import extract
    from rulec.runtime.codegen.lower import _lower
    from rulec.runtime.interpret.interpret import run_kernel as interpret

    ast = _kernel_with_regroupable_index()
    counts = {}
    for budget in ("0", "2"):
        monkeypatch.setenv("RULEC_EGGLOG_BUDGET", budget)
        _lower.cache_clear()
        counts[budget] = extract.alu_count(extract.index_operands(lower(ast, "cpu").lowered))
    _lower.cache_clear()
    assert counts["2"] < counts["0"], counts  # (r0*4 + r1*4) % 64 is (r0 + r1)*4 % 64: one MUL fewer
    src = np.arange(64, dtype=np.float32)
    want, got = np.zeros(64, np.float32), np.zeros(64, np.float32)
    interpret(ast, [want, src.copy()], {})
    run_kernel(ast, [got, src.copy()], {}, "CPU")
    np.testing.assert_array_equal(got, want)


def test_egglog_extraction_never_adds_ops_on_the_corpus():
    from rulec.runtime.codegen import extract

    for label, item in _kernels_of_corpus():
        k = lower(item.ast, "cpu")
        before = extract.index_operands(k.lowered)
        assert extract.alu_count(extract.index_operands(extract.extract_indices(k.lowered))) <= \
            extract.alu_count(before), label


def test_cpu_reduce_kernels_upcast_a_tile_of_their_two_innermost_output_loops():
    from rulec.runtime.codegen.helpers import UPCAST2
    from rulec.runtime.codegen.steps import INNER_LANES

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 16)).astype(np.float32)
    item = Tensor.schedule(T(a) @ T(b))[0]
    src = render(item.ast, "c", vectors=False)  # the tile's lanes as scalars (tests/test_vectorize.py: as vectors)
    lanes = INNER_LANES * UPCAST2
    assert all(f"float acc{k};" in src for k in range(lanes)) and f"acc{lanes};" not in src
    assert src.count("for (") == 3  # two output loops (32/UPCAST2 and 16/INNER_LANES long), one shared reduce
    assert f"< {16 // INNER_LANES}; " in src and f"< {32 // UPCAST2}; " in src
    # each lane loads once per reduce step what only its row or only its column needs: 4 + 4 loads, not 16 + 16
    assert src.count("data1[") == UPCAST2 and src.count("data2[") == INNER_LANES
    assert "acc1" not in item.render("opencl")  # GPU targets use thread ids instead
    np.testing.assert_allclose((T(a) @ T(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_cpu_reduce_kernels_upcast_their_innermost_output_loop_alone_when_no_tile_fits():
    from rulec.runtime.codegen.helpers import UPCAST

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 48)).astype(np.float32), rng.standard_normal((48, 16)).astype(np.float32)
    item = Tensor.schedule(T(a) @ T(b))[0]
    src = render(item.ast, "c", vectors=False)
    assert all(f"float acc{k};" in src for k in range(UPCAST)) and f"acc{UPCAST};" not in src
    assert f"< {16 // UPCAST}; " in src
    np.testing.assert_allclose((T(a) @ T(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_a_convolution_tiles_output_channels_with_pixels_when_no_loop_is_a_multiple_of_eight():
    # output 20 x 20 pixels: no loop of 8 lanes along the row, so the tile takes 8 output channels (each
    # input pixel serves all 8) by 4 pixels of the row (each weight serves all 4): 4 + 8 loads per step
    from rulec.runtime.codegen.helpers import UPCAST, UPCAST2

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 24, 24)).astype(np.float32), rng.standard_normal((32, 3, 5, 5)).astype(np.float32)
    out = T(x).conv2d(T(w))
    src = render(Tensor.schedule(out)[-1].ast, "c", vectors=False)
    lanes = UPCAST * UPCAST2
    assert f"float acc{lanes - 1};" in src and f"acc{lanes};" not in src
    assert "< 4; " in src and "< 5; " in src  # 32 channels / 8 lanes, 20 pixels / 4 lanes
    assert src.count("data1[") == UPCAST2 and src.count("data2[") == UPCAST
    want = np.zeros((2, 32, 20, 20), np.float32)
    for dy in range(5):
        for dx in range(5):
            want += np.einsum("bchw,oc->bohw", x[:, :, dy:dy + 20, dx:dx + 20], w[:, :, dy, dx])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_equal_kernels_of_two_schedules_are_lowered_once():
    # a kernel AST keeps its schedule's tags (numbered over the whole graph): lowering drops them, so the
    # same kernel in a larger schedule (the next step of a training loop) reuses the first lowering
    from rulec.runtime.codegen.lower import _lower, lower
    from rulec.runtime.ir.uop import untagged

    a = T(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    first = Tensor.schedule(((a + 1) * 2).sum(1))[-1].ast
    items = Tensor.schedule((a * 5).exp().max(), ((a + 1) * 2).sum(1))
    (second,) = [it.ast for it in items if untagged(it.ast) is untagged(first)]
    assert second is not first  # the premise: the tags differ
    lower(first, "cpu")
    misses = _lower.cache_info().misses
    assert lower(second, "cpu") is lower(first, "cpu") and _lower.cache_info().misses == misses


def test_copies_of_realized_buffers_views_and_constants():
    """.to() of a realized buffer is one copy (it used to lose its output: the copy's tag was dropped when
    the reshape moved after it), of a view of one its copy, and of a constant a constant (it used to leave
    INDEX(CONST) in a kernel)."""
    x = Tensor(np.arange(6, dtype=np.float32)).realize()
    y = x.to("PYTHON")
    assert len(Tensor.schedule(y)) == 1
    np.testing.assert_array_equal(y.numpy(), np.arange(6))
    np.testing.assert_array_equal(x.reshape(3, 2).to("PYTHON").numpy(), np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(x[1:3].to("PYTHON").numpy(), [1, 2])
    np.testing.assert_array_equal((x.reshape(2, 3).to("PYTHON") * 2).numpy(), np.arange(6).reshape(2, 3) * 2)
    assert (Tensor(3.0).to("PYTHON") * 2).numpy() == 6.0
    np.testing.assert_array_equal((Tensor.full((2, 2), 3.0).to("PYTHON") + 1).numpy(), np.full((2, 2), 4.0))


# ------------------------------------------------------------------ the outer loop on several cores (C, OpenMP)


def _parallel_case():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 96)).astype(np.float32), rng.standard_normal((96, 256)).astype(np.float32)
    return a, b, Tensor.schedule(T(a) @ T(b))[0]


def test_a_large_kernel_splits_its_outer_output_loop_among_threads_with_private_accumulators():
    from rulec.backends.c.runner import find_cc, openmp_flags
    from rulec.backends.render import render

    a, b, item = _parallel_case()
    src = render(item.ast, "c")
    lines = src.splitlines()
    (i,) = [n for n, line in enumerate(lines) if "#pragma omp parallel for" in line]
    assert lines[i + 1].lstrip().startswith("for (int r0 = 0;")  # the outermost loop, an output loop
    # scalar accumulators (float accN) or vector ones (rulec_floatx8 accN)
    declared = {line.split()[1].rstrip(";") for line in lines[:i] if line.split()[1:2] and line.split()[1].startswith("acc")}
    assert declared and declared == set(lines[i].split("private(")[1].rstrip(")").split(", "))
    if openmp_flags(find_cc()) == ():
        pytest.skip("the C compiler builds no OpenMP code here")
    np.testing.assert_allclose((T(a) @ T(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_threads_give_the_same_bits_as_one_thread():
    from rulec.backends.c.runner import compile_c
    from rulec.backends.render import kernel_name, render

    a, b, item = _parallel_case()
    src, name = render(item.ast, "c"), kernel_name(item.ast)
    serial = "\n".join(line for line in src.splitlines() if "#pragma omp" not in line)
    outs = []
    for text in (src, serial):
        out = np.zeros((512, 256), np.float32)
        compile_c(name, text)([out, a.copy(), b.copy()])
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("program", [
    lambda x: x.sum(),  # the outer loop is the reduction's: never split
    lambda x: x[:16, :16] @ x[:16, :16],  # little work: one thread
])
def test_reductions_outermost_and_small_kernels_stay_on_one_thread(program):
    from rulec.backends.render import render

    x = T(np.ones((1024, 1024), np.float32))
    assert all("#pragma omp" not in render(it.ast, "c") for it in Tensor.schedule(program(x)))


@pytest.mark.parametrize("language", ["opencl", "cuda", "metal"])
def test_gpu_kernels_never_get_the_host_threads_line(language):
    from rulec.backends.render import render

    *_, item = _parallel_case()
    assert "#pragma omp" in render(item.ast, "c") and "#pragma omp" not in render(item.ast, language)


@pytest.mark.parametrize("dt,bits", [(np.float32, np.uint32), (np.float64, np.uint64)])
@pytest.mark.parametrize("device", ["CPU", CL])
def test_a_float_select_keeps_every_bit_of_the_value_it_picks(device, dt, bits):
    # C selects floats by their bits (a form gcc vectorizes, where it keeps `c ? x : y` scalar): nan
    # payloads, -0.0 and infinities pass unchanged, on either side of the select
    x = np.array([0, 0, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.5], dt)
    top = np.iinfo(bits).max >> 1                      # sign clear, exponent and mantissa all ones: a nan
    x.view(bits)[:2] = [top, top - 5]                  # two nans with distinct payloads
    y = x[::-1].copy()
    cond = np.array([True, False, True, False, False, True, True, False])
    out = T(cond).to(device).where(T(x).to(device), T(y).to(device))
    if device == "CPU":
        assert "union" in Tensor.schedule(out)[-1].render("c")
    assert out.numpy().view(bits).tolist() == np.where(cond, x, y).view(bits).tolist()
    relu = T(x).to(device).relu().numpy()
    assert relu.view(bits).tolist() == np.where(x > 0, x, dt(0)).view(bits).tolist()


def _loops_open_at(steps, pred):
    """The RANGEs open at the first step whose node satisfies `pred`."""
    open_loops = []
    for s in steps:
        if s.kind == "open":
            open_loops.append(s.uop)
        elif s.kind == "close":
            open_loops.remove(s.uop)
        elif pred(s.uop):
            return list(open_loops)
    raise AssertionError("no such step")


def _global_load(number):
    return lambda u: u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and u.src[0].src[0].arg == number


def test_a_bias_added_after_a_reduction_is_loaded_where_it_is_added_not_before_the_tile():
    # loaded where its index is known (outside the tile's output loops) the bias held a register through
    # the reduction, and the 32 accumulators spilled: a 5x5 convolution with a bias ran at a third of the
    # speed of the one without (132 ms against 47, two cores)
    rng = np.random.default_rng(5)
    x, w, b = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in [(2, 8, 12, 12), (16, 8, 3, 3), (16,)])
    out = x.conv2d(w, b)
    (item,) = Tensor.schedule(out)
    k = lower(item.ast)
    bias = next(i for i, buf in enumerate(item.buffers) if buf.arg == 16)
    at_store = _loops_open_at(k.steps, lambda u: u.op is Ops.STORE)
    at_bias = _loops_open_at(k.steps, _global_load(bias))
    assert at_bias == [r for r in at_store if r.arg[-1] != "reduce"]
    xs, ws, bs = x.numpy().astype(np.float64), w.numpy().astype(np.float64), b.numpy().astype(np.float64)
    want = np.zeros((2, 16, 10, 10))
    for i in range(3):
        for j in range(3):
            want += np.einsum("bchw,oc->bohw", xs[:, :, i:i + 10, j:j + 10], ws[:, :, i, j])
    np.testing.assert_allclose(out.numpy(), want + bs.reshape(1, 16, 1, 1), rtol=1e-4, atol=1e-4)


def test_a_value_read_inside_a_reduction_is_not_sunk_into_its_loop():
    # a per-row scale multiplied inside the sum stays outside the reduce loop: inside it would load each step
    rng = np.random.default_rng(6)
    a, s = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    out = (Tensor(a).exp() * Tensor(s).reshape(64, 1)).sum(1)
    (item,) = Tensor.schedule(out)
    k = lower(item.ast)
    scale = next(i for i, buf in enumerate(item.buffers) if buf.arg == 64 and i != 0)
    assert all(r.arg[-1] != "reduce" for r in _loops_open_at(k.steps, _global_load(scale)))
    np.testing.assert_allclose(out.numpy(), (np.exp(a) * s[:, None]).sum(1), rtol=1e-4)


@pytest.mark.parametrize("device", ["CPU", "PYTHON", CL])
def test_a_kernel_whose_reads_of_a_buffer_all_fold_away_still_takes_that_buffer(device):
    # a strided, padded window that lands only on padding: the gate rules fold every read of the input to 0,
    # but the schedule item still passes the input, so the kernel must still take it as a parameter (it was
    # "takes 2 buffers, got 3")
    saved = Device.DEFAULT
    Device.DEFAULT = device
    try:
        x, w = T(np.arange(1, 4, dtype=np.float32).reshape(1, 1, 1, 3)), T(np.full((1, 1, 1, 1), 2, np.float32))
        out = x.conv2d(w, stride=2, padding=1).numpy()
    finally:
        Device.DEFAULT = saved
    np.testing.assert_array_equal(out, np.zeros((1, 1, 2, 3), np.float32))
