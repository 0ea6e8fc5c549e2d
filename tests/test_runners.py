"""The device runners with hand-written kernels in the shapes the code generator emits: C and OpenCL run and
equal numpy, CUDA compiles to PTX that ptxas accepts, Metal passes (or fails) the stand-in check."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rulec.backends import cache
from rulec.backends.c import runner as c_runner
from rulec.backends.c.runner import compile_c
from rulec.backends.errors import DeviceUnavailable, KernelCompileError, numbered
from rulec.backends.params import kernel_params

C_SUM = """#include <math.h>
#include <stdbool.h>
#include <stdint.h>
void r_4_3(float* data0, const float* data1, int n0) {
  for (int r0 = 0; r0 < 4; r0++) {
    float acc0 = 0.0f;
    for (int r1 = 0; r1 < n0; r1++) { acc0 += data1[r0 * n0 + r1]; }
    data0[r0] = acc0;
  }
}
"""

C_MATH = """#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
void e_8(float* data0, int* data1, const float* data2) {
  for (int i = 0; i < 8; i++) {
    float x = data2[i];
    float y = exp2f(x) + log2f(fabsf(x) + 1.0f) + sqrtf(fabsf(x)) + sinf(x) + fmaxf(x, 0.5f) + truncf(x);
    data0[i] = isnan(x) ? INFINITY : (x > 100.0f ? NAN : y);
    int bits; memcpy(&bits, &data2[i], sizeof(bits));
    data1[i] = bits;
  }
}
"""


def _math_want(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        y = (np.exp2(x) + np.log2(np.abs(x) + 1) + np.sqrt(np.abs(x)) + np.sin(x) + np.maximum(x, np.float32(0.5))
             + np.trunc(x)).astype(np.float32)
    return np.where(np.isnan(x), np.inf, np.where(x > 100, np.nan, y)).astype(np.float32)


# -- shared pieces ---------------------------------------------------------------------------------------------

def test_kernel_params_read_every_language():
    c = kernel_params(C_SUM, "r_4_3")
    cl = kernel_params("__kernel void k(__global float* data0, __global const float* data1, const int n0) {}", "k")
    cu = kernel_params('extern "C" __global__ void k(float* data0, const unsigned char* data1, const int n0) {}',
                       "k")
    for params in (c, cl, cu):
        assert [(p.name, p.pointer) for p in params] == [("data0", True), ("data1", True), ("n0", False)]
        assert [p.const for p in params[:2]] == [False, True]
    assert c[0].dtype == np.float32 and cu[1].dtype == np.uint8 and c[2].ctype == "int"
    assert kernel_params(C_SUM, "missing") is None


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RULEC_CACHE_DIR", str(tmp_path / "r"))
    assert cache.kernel_cache_dir() == tmp_path / "r" / "kernels"
    monkeypatch.delenv("RULEC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache.kernel_cache_dir() == tmp_path / "x" / "rulec" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache.kernel_cache_dir() == tmp_path / "h" / ".cache" / "rulec" / "kernels"


def test_cache_key_covers_every_part():
    base = ("c", "gcc 12", ["-O2"], "void k(){}")
    keys = {cache.cache_key(*base), cache.cache_key("opencl", *base[1:]), cache.cache_key("c", "gcc 13", *base[2:]),
            cache.cache_key("c", "gcc 12", ["-O3"], base[3]), cache.cache_key(*base[:3], "void k(){ }"),
            cache.cache_key("c", "gcc 12", ["-O2", "x"], ""), cache.cache_key("c", "gcc 12", ["-O2x"], "")}
    assert len(keys) == 7


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "k.so"
    with pytest.raises(RuntimeError):
        with cache.atomic_output(final) as tmp:
            tmp.write_text("half")
            raise RuntimeError("compiler died")
    assert list(tmp_path.iterdir()) == []
    with cache.atomic_output(final) as tmp:
        tmp.write_text("whole")
    assert [p.name for p in tmp_path.iterdir()] == ["k.so"] and final.read_text() == "whole"


def test_compile_error_message_shape():
    err = KernelCompileError("r_1", "C", "int a;\n" * 12, "boom at line 3", "cc -x c -")
    text = str(err)
    assert "'r_1'" in text and "`cc -x c -`" in text and "boom at line 3" in text
    assert "  12 | int a;" in text and "   1 | int a;" in text
    assert numbered("a\nb").splitlines() == ["   1 | a", "   2 | b"]


# -- C -------------------------------------------------------------------------------------------------------

def test_c_sum_runs_and_equals_numpy():
    prog = compile_c("r_4_3", C_SUM)
    x = np.random.default_rng(0).standard_normal(12).astype(np.float32)
    out = np.zeros(4, np.float32)
    prog([out, x], [3])
    np.testing.assert_allclose(out, x.reshape(4, 3).sum(1), rtol=1e-6)
    assert compile_c("r_4_3", C_SUM) is prog  # the in-process memo


def test_c_math_special_values_and_bitcast():
    x = np.array([0.0, -1.5, 2.25, 3.0, np.nan, 200.0, -0.0, 7.75], np.float32)
    out, bits = np.zeros(8, np.float32), np.zeros(8, np.int32)
    compile_c("e_8", C_MATH)([out, bits, x])
    np.testing.assert_allclose(out, _math_want(x), rtol=1e-6)
    assert np.array_equal(bits, x.view(np.int32))


def test_c_pointer_cache_never_goes_stale():
    prog = compile_c("r_4_3", C_SUM)
    out = np.zeros(4, np.float32)
    for k in range(3):  # a new input array each time, and the same one twice
        x = np.full(12, float(k), np.float32)
        prog([out, x], [3])
        prog([out, x], [3])
        assert out.tolist() == [3.0 * k] * 4
    out2 = np.zeros(4, np.float32)
    prog([out2, x], [3])
    assert out2.tolist() == [6.0] * 4


def test_c_call_checks_its_arguments():
    prog = compile_c("r_4_3", C_SUM)
    out, x = np.zeros(4, np.float32), np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="must be float32, got float64"):
        prog([out, x.astype(np.float64)], [3])
    with pytest.raises(ValueError, match="not C-contiguous"):
        prog([out, np.zeros(24, np.float32)[::2]], [3])
    with pytest.raises(ValueError, match="takes 2 buffers and 1 values"):
        prog([out, x], [])
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(4, np.float32)
        ro.flags.writeable = False
        prog([ro, x], [3])
    prog([out, x], [3])  # fills the fast path; a wrong value count must still be caught there
    with pytest.raises(ValueError, match="takes 2 buffers and 1 values"):
        prog([out, x], [3, 4])


def test_c_compile_error_names_the_kernel_and_numbers_the_source():
    src = C_SUM.replace("acc0 += data1", "acc0 += dta1")
    with pytest.raises(KernelCompileError) as info:
        compile_c("r_4_3", src)
    err = info.value
    assert err.name == "r_4_3" and err.language == "C" and "dta1" in err.log
    assert "   7 |     for (int r1 = 0; r1 < n0; r1++) { acc0 += dta1" in str(err)
    assert "-x c -" in str(err)


def test_rulec_cc_that_does_not_exist_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RULEC_CC", "/nonexistent/cc")
    with pytest.raises(DeviceUnavailable, match="RULEC_CC='/nonexistent/cc' is not an executable"):
        compile_c("r_4_3", C_SUM)


SECOND_PROCESS = """
import numpy as np
from rulec.backends.c.runner import compile_c
src = open({src!r}).read()
out, x = np.zeros(4, np.float32), np.arange(12, dtype=np.float32)
compile_c("r_4_3", src)([out, x], [3])
assert out.tolist() == [3.0, 12.0, 21.0, 30.0], out
"""


def test_a_second_process_compiles_nothing(tmp_path):
    cc = c_runner.find_cc()
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cc-wrapper"
    # counts real compiles (not the --version the cache key asks for), then runs the real compiler
    wrapper.write_text(f'#!/bin/sh\ncase "$1" in --version|-print*) ;; *) echo x >> {log} ;; esac\n'
                       f'exec {cc} "$@"\n')
    wrapper.chmod(0o755)
    src = tmp_path / "k.c"
    src.write_text(C_SUM)
    env = {**os.environ, "RULEC_CACHE_DIR": str(tmp_path / "cache"), "RULEC_CC": str(wrapper)}
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", SECOND_PROCESS.format(src=str(src))], env=env,
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    assert log.read_text().count("x") == 1
    assert len(list((tmp_path / "cache" / "kernels").glob("*.so"))) == 1
    assert not list((tmp_path / "cache" / "kernels").glob(".*.tmp"))


ASAN_PROGRAM = """
import numpy as np
from rulec.backends.c.runner import compile_c
src = "void k(float* data0, const float* data1, int n0) {{ for (int i = 0; i < n0; i++) data0[i] = data1[i]; }}"
out, x = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
compile_c("k", src)([out, x], [{n}])
print("ran", out.tolist())
"""


@pytest.fixture(scope="module")
def asan_env(tmp_path_factory):
    runtime = c_runner.asan_runtime()
    if runtime is None:
        pytest.skip(f"the C compiler {c_runner.find_cc()} has no ASan runtime installed")
    return {**os.environ, "RULEC_CACHE_DIR": str(tmp_path_factory.mktemp("asan-cache")),
            "RULEC_CFLAGS_EXTRA": "-fsanitize=address -fno-omit-frame-pointer",
            "LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0"}


def test_asan_build_runs_a_good_kernel_and_catches_an_overflow(asan_env):
    good = subprocess.run([sys.executable, "-c", ASAN_PROGRAM.format(n=4)], env=asan_env, capture_output=True,
                          text=True)
    assert good.returncode == 0 and "ran [0.0, 1.0, 2.0, 3.0]" in good.stdout, good.stderr
    bad = subprocess.run([sys.executable, "-c", ASAN_PROGRAM.format(n=5)], env=asan_env, capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in bad.stderr


def test_asan_without_its_runtime_is_an_error_not_a_crash(asan_env):
    env = {k: v for k, v in asan_env.items() if k != "LD_PRELOAD"}
    res = subprocess.run([sys.executable, "-c", ASAN_PROGRAM.format(n=4)], env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "DeviceUnavailable" in res.stderr and "LD_PRELOAD=" in res.stderr


# -- OpenCL ----------------------------------------------------------------------------------------------------

CL_SUM = """__kernel void r_4_3(__global float* data0, __global const float* data1, const int n0) {
  int g0 = get_global_id(0); if (g0 >= 4) return;
  float acc0 = 0.0f;
  for (int r1 = 0; r1 < n0; r1++) { acc0 += data1[g0 * n0 + r1]; }
  data0[g0] = fmax(acc0, -1.0f) + as_float(as_int(0.0f));
}
"""


@pytest.fixture(scope="module")
def cl_runner():
    from rulec.backends.opencl import runner
    try:
        runner.context()
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    return runner


def test_opencl_runs_and_equals_numpy(cl_runner):
    prog = cl_runner.compile_cl("r_4_3", CL_SUM)
    x = np.random.default_rng(1).standard_normal(12).astype(np.float32)
    out, before = np.zeros(4, np.float32), x.copy()
    prog([out, x], [3], global_size=(8, 1, 1))  # more threads than outputs: the bounds check holds
    np.testing.assert_allclose(out, np.maximum(x.reshape(4, 3).sum(1), -1), rtol=1e-6)
    assert np.array_equal(x, before)  # const inputs are not copied back
    assert cl_runner.compile_cl("r_4_3", CL_SUM) is prog
    with pytest.raises(ValueError, match="must be float32"):
        prog([out, x.astype(np.float64)], [3], global_size=(4, 1, 1))


def test_opencl_build_error_has_the_log(cl_runner):
    with pytest.raises(KernelCompileError) as info:
        cl_runner.compile_cl("r_4_3", CL_SUM.replace("acc0 += data1", "acc0 += dta1"))
    assert "dta1" in info.value.log and "   4 |   for (int r1" in str(info.value)


# -- CUDA ------------------------------------------------------------------------------------------------------

CU_SUM = """extern "C" __global__ void r_4_3(float* data0, const float* data1, const int n0) {
  int g0 = blockIdx.x * blockDim.x + threadIdx.x; if (g0 >= 4) return;
  float acc0 = 0.0f;
  for (int r1 = 0; r1 < n0; r1++) { acc0 += data1[g0 * n0 + r1]; }
  data0[g0] = fmaxf(exp2f(acc0), __int_as_float(0)) + (isnan(acc0) ? __int_as_float(0x7f800000) : 0.0f);
}
"""


@pytest.fixture()
def cuda_runner():
    from rulec.backends.cuda import nvrtc, runner
    if nvrtc.load() is None and shutil.which("nvcc") is None:
        pytest.skip("no CUDA compiler here: neither NVRTC (pip nvidia-cuda-nvrtc) nor nvcc")
    return runner


def _ptxas_accepts(ptx: str, tmp_path: Path) -> None:
    if shutil.which("ptxas") is None:
        return
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    res = subprocess.run(["ptxas", "-arch=sm_90", "-o", os.devnull, str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_cuda_good_kernel_gives_ptx_that_ptxas_accepts(cuda_runner, tmp_path):
    ptx = cuda_runner.compile_cuda("r_4_3", CU_SUM)
    assert ".entry r_4_3" in ptx and ".target sm_90" in ptx
    _ptxas_accepts(ptx, tmp_path)
    assert cuda_runner.compile_cuda("r_4_3", CU_SUM) == ptx  # from the disk cache


def test_cuda_through_nvcc_too(cuda_runner, monkeypatch, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    monkeypatch.setattr(cuda_runner.nvrtc, "load", lambda: None)
    ptx = cuda_runner.compile_cuda("r_4_3", CU_SUM)
    assert ".entry r_4_3" in ptx
    _ptxas_accepts(ptx, tmp_path)
    with pytest.raises(KernelCompileError, match="nvcc -ptx"):
        cuda_runner.compile_cuda("r_4_3", CU_SUM.replace("acc0 += data1", "acc0 += dta1"))


def test_cuda_bad_kernel_raises(cuda_runner):
    with pytest.raises(KernelCompileError) as info:
        cuda_runner.compile_cuda("r_4_3", CU_SUM.replace("acc0 += data1", "acc0 += dta1"))
    assert "dta1" in info.value.log and "   4 |   for (int r1" in str(info.value)


def test_ptxas_rejection_is_a_compile_error(cuda_runner):
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on PATH")
    ptx = cuda_runner.compile_cuda("r_4_3", CU_SUM)
    with pytest.raises(KernelCompileError, match="ptxas rejected"):
        cuda_runner._validate("r_4_3", CU_SUM, ptx.replace("ret;", "ret_not_an_instruction;"), "sm_90",
                              shutil.which("ptxas"))


def test_cuda_program_without_a_driver_says_so(monkeypatch):
    from rulec.backends.cuda import runner
    monkeypatch.setattr(runner.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(DeviceUnavailable, match="CUDA: no GPU driver on this machine .libcuda not found.; "
                                                "kernels still render and compile to PTX"):
        runner.CUDAProgram("r_4_3", "// ptx")([np.zeros(4, np.float32)])


# -- Metal -----------------------------------------------------------------------------------------------------

METAL_SUM = """#include <metal_stdlib>
using namespace metal;
kernel void r_4_3(device float* data0 [[buffer(0)]], const device float* data1 [[buffer(1)]],
                  constant int& n0 [[buffer(2)]], uint3 gid [[thread_position_in_grid]]) {
  int g0 = gid.x; if (g0 >= 4) return;
  float acc0 = 0.0f;
  for (int r1 = 0; r1 < n0; r1++) { acc0 = max(acc0, data1[g0 * n0 + r1]); }
  float v = exp2(acc0) + log2(acc0) + sqrt(acc0) + sin(acc0) + fmax(acc0, 1.0f) + trunc(acc0);
  v = select(v, INFINITY, isnan(v)) + (isinf(v) ? NAN : 0.0f) + (float)g0 + as_type<float>(g0);
  half h = (half)v; bfloat b = (bfloat)v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  data0[g0] = v + (float)h + (float)b + as_type<float>(as_type<uint>(v));
}
"""


@pytest.fixture()
def metal():
    from rulec.backends.metal import check
    try:
        check.find_clang()
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    return check


def test_metal_good_kernel_passes(metal):
    metal.check_metal("r_4_3", METAL_SUM)
    metal.check_metal("r_4_3", METAL_SUM.replace("[[thread_position_in_grid]]", "[[ thread_position_in_grid ]]"))


@pytest.mark.parametrize("old, new, message", [
    ("[[thread_position_in_grid]]", "[[thread_positon_in_grid]]",
     "line 4: unknown Metal attribute [[thread_positon_in_grid]] (did you mean thread_position_in_grid?)"),
    ("[[buffer(1)]]", "[[buffer(one)]]", "needs an integer index"),
    ("device float* data0", "float* data0", "must reside in 'device', 'constant' or 'threadgroup'"),
    ("const device float* data1", "const thread float* data1", "must reside in"),
    ("  data0[g0] = v", "  threadgroup float tile[4];\n  device float* out = tile;\n  data0[g0] = v",
     "'device float *thread' with an lvalue of type 'threadgroup float"),
    ("float acc0 = 0.0f;", "double acc0 = 0.0;", "use of type 'double'"),
    ("kernel void r_4_3", "kernel float r_4_3", "kernel must have void return type"),
    ("exp2(acc0)", "exp10(acc0)", "exp10"),
])
def test_metal_check_rejects(metal, old, new, message):
    src = METAL_SUM.replace(old, new)
    assert src != METAL_SUM
    with pytest.raises(KernelCompileError) as info:
        metal.check_metal("r_4_3", src)
    assert message in info.value.log and info.value.language == "Metal"
    assert "   1 | #include <metal_stdlib>" in str(info.value)


def test_metal_never_runs_off_macos(metal):
    prog = metal.MetalProgram("r_4_3", METAL_SUM)
    if sys.platform == "darwin":
        pytest.skip("this test is about machines without Metal")
    with pytest.raises(DeviceUnavailable, match="METAL kernels run only on macOS.*rendered and checked"):
        prog([np.zeros(4, np.float32)])
