"""The CUDA driver launch (backends/cuda/driver.py), tested without a GPU through a fake driver library: a
Python object with the binding's calls, whose "device memory" is numpy and which records every call. The
fake checks what the real driver would (cuInit first, a current context, live device pointers, parameter
sizes from the PTX entry) and runs a launched kernel with a Python function, or, for kernels rulec schedules,
with the reference interpreter on the device memory. Tests against a real GPU run only where a driver is."""
from __future__ import annotations

import ctypes
import math
import re
import shutil
import subprocess
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
import pytest

from rulec import Tensor
from rulec.backends import device as device_mod
from rulec.backends.cuda import driver, nvrtc, runner
from rulec.backends.errors import DeviceUnavailable
from rulec.runtime.buffers import numpy_dtype
from rulec.runtime.interpret.interpret import run_kernel as interpret
from rulec.runtime.ir.uop import UOp

ERRORS = {
    1: ("CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    2: ("CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
    3: ("CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
    100: ("CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
    201: ("CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
    218: ("CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"),
    500: ("CUDA_ERROR_NOT_FOUND", "named symbol not found"),
    700: ("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"),
}
BASE = 0x7F00_0000_0000  # above 2**32: a pointer cut to 32 bits would not be found


def _entry_params(ptx: str, name: str) -> list[str] | None:
    """The parameter types ("u64", "u32", "s32") of the entry `name`, or None without one."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\(([^)]*)\)", ptx)
    return None if m is None else re.findall(r"\.param\s+\.([a-z]\d+)", m.group(1))


class FakeCUDA:
    """The binding's library surface (driver.SIGNATURES), in Python."""

    def __init__(self, devices: int = 1, fail: dict[str, int] | None = None,
                 run: Callable[..., None] | None = None) -> None:
        self.devices, self.fail, self.run = devices, dict(fail or {}), run
        self.calls: list[tuple[str, tuple]] = []
        self.mem: dict[int, np.ndarray] = {}
        self.freed: list[int] = []
        self.next_ptr = BASE
        self.inited = False
        self.tls = threading.local()            # the current context is per thread, as in CUDA
        self.contexts: dict[int, int] = {}     # context handle -> device
        self.modules: dict[int, str] = {}      # module handle -> PTX
        self.functions: dict[int, tuple[str, str]] = {}  # function handle -> (PTX, name)
        self.launches: list[dict[str, Any]] = []

    def _enter(self, call: str, *args: Any, needs_context: bool = True) -> int:
        self.calls.append((call, args))
        if call in self.fail:
            return self.fail[call]
        if call not in ("cuInit", "cuGetErrorName", "cuGetErrorString") and not self.inited:
            return 3
        if needs_context and getattr(self.tls, "current", None) is None:
            return 201
        return 0

    # -- the calls ------------------------------------------------------------------------------------------
    def cuInit(self, flags):
        status = self._enter("cuInit", flags, needs_context=False)
        self.inited = self.inited or status == 0
        return status

    def cuDeviceGetCount(self, count):
        status = self._enter("cuDeviceGetCount", needs_context=False)
        if status == 0:
            count._obj.value = self.devices
        return status

    def cuDeviceGet(self, dev, ordinal):
        status = self._enter("cuDeviceGet", ordinal, needs_context=False)
        if status == 0 and not 0 <= ordinal < self.devices:
            return 101
        if status == 0:
            dev._obj.value = ordinal
        return status

    def cuDevicePrimaryCtxRetain(self, ctx, dev):
        status = self._enter("cuDevicePrimaryCtxRetain", dev, needs_context=False)
        if status == 0:
            handle = 0x1000 + dev
            self.contexts[handle] = dev
            ctx._obj.value = handle
        return status

    def cuCtxSetCurrent(self, ctx):
        status = self._enter("cuCtxSetCurrent", ctx.value, needs_context=False)
        if status == 0:
            if ctx.value not in self.contexts:
                return 201
            self.tls.current = ctx.value
        return status

    def cuCtxSynchronize(self):
        return self._enter("cuCtxSynchronize")

    def cuModuleLoadData(self, module, image):
        ptx = image.decode()
        status = self._enter("cuModuleLoadData", ptx)
        if status == 0:
            handle = 0x2000 + len(self.modules)
            self.modules[handle] = ptx
            module._obj.value = handle
        return status

    def cuModuleGetFunction(self, fn, module, name):
        status = self._enter("cuModuleGetFunction", module.value, name.decode())
        if status == 0:
            ptx = self.modules[module.value]
            if _entry_params(ptx, name.decode()) is None:
                return 500
            handle = 0x3000 + len(self.functions)
            self.functions[handle] = (ptx, name.decode())
            fn._obj.value = handle
        return status

    def cuMemAlloc_v2(self, ptr, nbytes):
        status = self._enter("cuMemAlloc_v2", nbytes)
        if status == 0:
            if nbytes == 0:
                return 1
            self.mem[self.next_ptr] = np.full(nbytes, 0xAB, np.uint8)  # fresh memory is garbage
            ptr._obj.value = self.next_ptr
            self.next_ptr += 1 << 32
        return status

    def cuMemFree_v2(self, ptr):
        status = self._enter("cuMemFree_v2", ptr)
        if status == 0:
            if ptr not in self.mem:
                return 1
            del self.mem[ptr]
            self.freed.append(ptr)
        return status

    def cuMemcpyHtoD_v2(self, dst, src, nbytes):
        status = self._enter("cuMemcpyHtoD_v2", dst, src, nbytes)
        if status == 0:
            if dst not in self.mem or nbytes > self.mem[dst].size:
                return 1
            self.mem[dst][:nbytes] = np.frombuffer(ctypes.string_at(src, nbytes), np.uint8)
        return status

    def cuMemcpyDtoH_v2(self, dst, src, nbytes):
        status = self._enter("cuMemcpyDtoH_v2", dst, src, nbytes)
        if status == 0:
            if src not in self.mem or nbytes > self.mem[src].size:
                return 1
            ctypes.memmove(dst, self.mem[src].ctypes.data, nbytes)
        return status

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        status = self._enter("cuLaunchKernel", fn.value, (gx, gy, gz), (bx, by, bz), shared, stream, extra)
        if status != 0:
            return status
        if fn.value not in self.functions or min(gx, gy, gz, bx, by, bz) < 1:
            return 1
        ptx, name = self.functions[fn.value]
        # read each parameter with the size its PTX declares, as the driver does
        args = []
        for i, kind in enumerate(_entry_params(ptx, name)):
            cls = {"u64": ctypes.c_uint64, "s32": ctypes.c_int32, "u32": ctypes.c_int32}[kind]
            args.append((kind, cls.from_address(params[i]).value))
        pointers = [v for k, v in args if k == "u64"]
        if any(p not in self.mem for p in pointers):
            return 700
        self.launches.append({"name": name, "grid": (gx, gy, gz), "block": (bx, by, bz), "args": args})
        if self.run is not None:
            self.run(ptx, name, [self.mem[p] for p in pointers], [v for k, v in args if k != "u64"],
                     (gx, gy, gz), (bx, by, bz))
        return 0

    def cuGetErrorName(self, code, out):
        return self._error_text("cuGetErrorName", code, out, 0)

    def cuGetErrorString(self, code, out):
        return self._error_text("cuGetErrorString", code, out, 1)

    def _error_text(self, call, code, out, which):
        """The driver's name (which=0) or description (1) of an error code; 1 for a code it does not know."""
        self.calls.append((call, (code,)))
        if code not in ERRORS:
            return 1
        out._obj.value = ERRORS[code][which].encode()
        return 0

    def names(self) -> list[str]:
        return [c for c, _ in self.calls if c not in ("cuGetErrorName", "cuGetErrorString")]


@pytest.fixture()
def fake(monkeypatch):
    """Install a FakeCUDA as the driver library (as if libcuda were present); the real state is restored."""
    monkeypatch.setattr(runner, "driver_present", lambda: True)
    monkeypatch.setattr(driver, "_driver", None)
    lib = FakeCUDA()
    driver.install(lib)
    return lib


ADD_PTX = """.version 9.0
.target sm_90
.address_size 64
.visible .entry add_val(
\t.param .u64 add_val_param_0,
\t.param .u64 add_val_param_1,
\t.param .u32 add_val_param_2
)
{
\tret;
}
"""


def _add_val(ptx, name, bufs, vals, grid, block):
    """data0 = data1 + val over float32; it also writes its input, which must not be copied back."""
    out, inp = bufs[0].view(np.float32), bufs[1].view(np.float32)
    out[:] = inp + vals[0]
    inp[:] = -1


def test_fake_has_the_binding_surface():
    for call in driver.SIGNATURES:
        assert callable(getattr(FakeCUDA(), call)), call


def test_a_launch_copies_in_launches_synchronizes_copies_outputs_back_and_frees(fake):
    fake.run = _add_val
    out, inp = np.zeros(6, np.float32), np.arange(6, dtype=np.float32)
    runner.CUDAProgram("add_val", ADD_PTX)([out, inp], [5], global_size=(6, 1, 1), outputs=[0])
    np.testing.assert_array_equal(out, np.arange(6) + 5)
    np.testing.assert_array_equal(inp, np.arange(6))  # written on the device, not an output: not copied back
    assert fake.names() == ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                            "cuCtxSetCurrent", "cuModuleLoadData", "cuModuleGetFunction",
                            "cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemAlloc_v2", "cuMemcpyHtoD_v2",
                            "cuLaunchKernel", "cuCtxSynchronize", "cuMemcpyDtoH_v2", "cuMemFree_v2", "cuMemFree_v2"]
    calls = dict(fake.calls)
    assert calls["cuModuleLoadData"] == (ADD_PTX,)  # the exact PTX
    assert calls["cuModuleGetFunction"][1] == "add_val"
    allocs = [a for c, a in fake.calls if c == "cuMemAlloc_v2"]
    assert allocs == [(24,), (24,)]
    (launch,) = fake.launches
    p0, p1 = sorted(fake.freed)
    assert launch["args"] == [("u64", p0), ("u64", p1), ("u32", 5)]  # buffers in order, then the value
    assert calls["cuMemcpyDtoH_v2"] == (out.ctypes.data, p0, 24)
    assert fake.mem == {}  # everything freed


def test_parameters_are_device_pointers_then_int32_values():
    params, args = driver.pack_params([BASE, BASE + (1 << 32)], [-5, 2**31 - 1])
    assert [type(a) for a in args] == [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32]
    assert list(params) == [ctypes.addressof(a) for a in args]
    assert ctypes.c_uint64.from_address(params[1]).value == BASE + (1 << 32)
    assert ctypes.c_int32.from_address(params[2]).value == -5


def test_negative_and_extreme_values_arrive_as_int32(fake):
    ptx = ADD_PTX.replace("\t.param .u32 add_val_param_2\n", "\t.param .u32 add_val_param_2,\n"
                          "\t.param .s32 add_val_param_3\n")
    out, inp = np.zeros(2, np.float32), np.zeros(2, np.float32)
    runner.CUDAProgram("add_val", ptx)([out, inp], [-7, -2**31], global_size=(2,))
    assert [v for _, v in fake.launches[0]["args"][2:]] == [-7, -2**31]


@pytest.mark.parametrize("global_size, local_size, grid, block", [
    ((6, 1, 1), None, (1, 1, 1), (6, 1, 1)),
    ((1000, 1, 1), None, (4, 1, 1), (256, 1, 1)),          # 1000 is not a multiple of 256
    ((1000, 1, 1), (128, 1, 1), (8, 1, 1), (128, 1, 1)),
    ((4, 3, 1), None, (1, 1, 1), (4, 3, 1)),
    ((300, 7, 1), None, (2, 7, 1), (256, 1, 1)),
    ((5, 7, 3), (2, 2, 2), (3, 4, 2), (2, 2, 2)),
    ((17, 9, 5), None, (1, 1, 5), (17, 9, 1)),
    ((33,), (8,), (5, 1, 1), (8, 1, 1)),
    ((1, 1, 1), None, (1, 1, 1), (1, 1, 1)),
])
def test_grid_is_global_over_local_rounded_up(fake, global_size, local_size, grid, block):
    hits: list[np.ndarray] = []

    def count_threads(ptx, name, bufs, vals, g, b):
        # each thread computes its ids as the template does (blockIdx*blockDim+threadIdx, bounds-checked)
        gs = (tuple(global_size) + (1, 1))[:3]
        seen = np.zeros(gs[::-1], np.int32)
        for bz, by, bx in np.ndindex(g[2], g[1], g[0]):
            for tz, ty, tx in np.ndindex(b[2], b[1], b[0]):
                x, y, z = bx * b[0] + tx, by * b[1] + ty, bz * b[2] + tz
                if x < gs[0] and y < gs[1] and z < gs[2]:
                    seen[z, y, x] += 1
        hits.append(seen)

    fake.run = count_threads
    out, inp = np.zeros(1, np.float32), np.zeros(1, np.float32)
    runner.CUDAProgram("add_val", ADD_PTX)([out, inp], [0], global_size=global_size, local_size=local_size)
    assert fake.launches[0]["grid"] == grid and fake.launches[0]["block"] == block
    assert math.prod(block) <= 1024
    assert (hits[0] == 1).all()  # every thread id of the global size runs exactly once


def test_launch_sizes_out_of_the_hardware_limits_are_errors():
    with pytest.raises(ValueError, match=r"local_size \(2048, 1, 1\) exceeds"):
        driver.launch_dims((4096,), (2048,))
    with pytest.raises(ValueError, match=r"local_size \(32, 32, 2\) exceeds"):
        driver.launch_dims((64, 64, 2), (32, 32, 2))
    with pytest.raises(ValueError, match=r"local_size \(0, 1\) must be positive"):
        driver.launch_dims((4, 4), (0, 1))
    with pytest.raises(ValueError, match=r"global_size \(1, 1, 1, 1\) must have 1 to 3"):
        driver.launch_dims((1, 1, 1, 1), None)
    with pytest.raises(ValueError, match=r"needs the grid \(1, 100000, 1\)"):
        driver.launch_dims((1, 100000), (1, 1))


def test_modules_and_contexts_are_made_once(fake):
    prog = runner.CUDAProgram("add_val", ADD_PTX)
    for _ in range(3):
        prog([np.zeros(2, np.float32), np.zeros(2, np.float32)], [1], global_size=(2,))
    other = ADD_PTX.replace(".target sm_90", ".target sm_80")
    runner.CUDAProgram("add_val", other)([np.zeros(2, np.float32), np.zeros(2, np.float32)], [1], global_size=(2,))
    names = fake.names()
    assert names.count("cuInit") == 1 and names.count("cuDevicePrimaryCtxRetain") == 1
    assert [a for c, a in fake.calls if c == "cuModuleLoadData"] == [(ADD_PTX,), (other,)]
    assert names.count("cuModuleGetFunction") == 2 and names.count("cuLaunchKernel") == 4
    assert names.count("cuCtxSetCurrent") == 4  # on every launch: the current context is per thread
    out = np.zeros(2, np.float32)
    fake.run = _add_val
    worker = threading.Thread(target=prog, args=([out, np.ones(2, np.float32)], [2]), kwargs={"global_size": (2,)})
    worker.start()
    worker.join()
    np.testing.assert_array_equal(out, [3, 3])  # another thread: its own cuCtxSetCurrent, the same module
    assert fake.names().count("cuModuleLoadData") == 2


def test_the_device_string_names_the_gpu(fake):
    fake.devices = 2
    runner.CUDAProgram("add_val", ADD_PTX, device="CUDA:1")([np.zeros(1, np.float32), np.zeros(1, np.float32)], [0])
    assert dict(fake.calls)["cuDeviceGet"] == (1,)
    with pytest.raises(DeviceUnavailable, match=r"CUDA:2 was asked for, but the driver sees 2 GPU"):
        runner.CUDAProgram("add_val", ADD_PTX, device="CUDA:2")([np.zeros(1, np.float32)] * 2, [0])
    with pytest.raises(ValueError, match="device 'CUDA:x'"):
        runner.CUDAProgram("add_val", ADD_PTX, device="CUDA:x")


@pytest.mark.parametrize("call, code, words", [
    ("cuMemAlloc_v2", 2, "cuMemAlloc_v2 failed (24 bytes): error 2 CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("cuMemcpyHtoD_v2", 1, "cuMemcpyHtoD_v2 failed: error 1 CUDA_ERROR_INVALID_VALUE: invalid argument"),
    ("cuModuleLoadData", 218, "cuModuleLoadData failed (the PTX of kernel 'add_val'): error 218 "
                              "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed"),
    ("cuLaunchKernel", 1, "cuLaunchKernel failed (kernel 'add_val', grid (1, 1, 1), block (6, 1, 1)): error 1"),
    ("cuCtxSynchronize", 700, "cuCtxSynchronize failed (after kernel 'add_val'): error 700 "
                              "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"),
    ("cuMemcpyDtoH_v2", 999, "cuMemcpyDtoH_v2 failed: error 999 (unknown to the driver): (unknown to the driver)"),
    ("cuMemFree_v2", 1, "cuMemFree_v2 failed: error 1 CUDA_ERROR_INVALID_VALUE"),
])
def test_a_failing_call_is_a_clear_error_and_memory_is_freed(fake, call, code, words):
    fake.fail[call] = code
    out = np.zeros(6, np.float32)
    with pytest.raises(driver.CUDADriverError) as info:
        runner.CUDAProgram("add_val", ADD_PTX)([out, np.ones(6, np.float32)], [1], global_size=(6,))
    assert info.value.call == call and info.value.code == code
    assert words in str(info.value)
    assert fake.names().count("cuMemFree_v2") == fake.names().count("cuMemAlloc_v2") - (call == "cuMemAlloc_v2")


def test_an_unknown_kernel_name_is_not_found(fake):
    with pytest.raises(driver.CUDADriverError, match="cuModuleGetFunction failed .kernel 'add_val'.: error 500 "
                                                     "CUDA_ERROR_NOT_FOUND"):
        driver.current().function(0, ADD_PTX.replace("add_val", "other"), "add_val")


def test_no_gpu_behind_the_driver_is_device_unavailable(fake):
    fake.fail["cuInit"] = 100
    with pytest.raises(DeviceUnavailable, match="CUDA: the GPU driver is installed but finds no GPU .cuInit: "
                                                "CUDA_ERROR_NO_DEVICE"):
        runner.CUDAProgram("add_val", ADD_PTX)([np.zeros(1, np.float32)] * 2, [0])


def test_a_driver_that_will_not_load_is_device_unavailable(monkeypatch):
    monkeypatch.setattr(runner, "driver_present", lambda: True)
    monkeypatch.setattr(driver, "_driver", None)

    def refuse(path, *a, **kw):
        raise OSError(f"{path}: cannot open shared object file")

    monkeypatch.setattr(driver.ctypes, "CDLL", refuse)
    with pytest.raises(DeviceUnavailable, match="CUDA: the GPU driver library could not be loaded"):
        runner.CUDAProgram("add_val", ADD_PTX)([np.zeros(1, np.float32)] * 2, [0])


def test_bad_calls_are_refused_before_the_driver(fake):
    prog = runner.CUDAProgram("add_val", ADD_PTX)
    two = [np.zeros(2, np.float32), np.zeros(2, np.float32)]
    with pytest.raises(ValueError, match=r"takes the parameters \(.u64, .u64, .u32\) in its PTX, got 1 buffers "
                                         "and 1 values"):
        prog(two[:1], [1])
    with pytest.raises(ValueError, match="got 2 buffers and 0 values"):
        prog(two)
    with pytest.raises(ValueError, match=r"value 0 must be an int that fits 32 bits, got 4294967296"):
        prog(two, [2**32])
    with pytest.raises(ValueError, match="output buffer 0 is read-only"):
        ro = np.zeros(2, np.float32)
        ro.flags.writeable = False
        prog([ro, two[1]], [1], outputs=[0])
    with pytest.raises(ValueError, match="output 5 is not one of its 2 buffers"):
        prog(two, [1], outputs=[5])
    with pytest.raises(ValueError, match="buffer 1 is not C-contiguous"):
        prog([two[0], np.zeros((2, 2), np.float32).T], [1])
    with pytest.raises(ValueError, match="the PTX has no entry named 'nope'"):
        runner.CUDAProgram("nope", ADD_PTX)(two, [1])
    src = 'extern "C" __global__ void add_val(float* __restrict__ data0, const float* __restrict__ data1, int n) {}'
    with pytest.raises(ValueError, match="buffer 1 .data1. must be float32, got int32"):
        runner.CUDAProgram("add_val", ADD_PTX, source=src)([two[0], np.zeros(2, np.int32)], [1])
    assert fake.calls == []  # nothing reached the driver, not even cuInit


def test_outputs_default_to_the_written_buffers_when_the_source_is_known(fake):
    fake.run = _add_val
    src = 'extern "C" __global__ void add_val(float* __restrict__ data0, const float* __restrict__ data1, int n) {}'
    out, inp = np.zeros(3, np.float32), np.ones(3, np.float32)
    runner.CUDAProgram("add_val", ADD_PTX, source=src)([out, inp], [2], global_size=(3,))
    np.testing.assert_array_equal(out, [3, 3, 3])
    np.testing.assert_array_equal(inp, [1, 1, 1])
    runner.CUDAProgram("add_val", ADD_PTX)([out, inp], [2], global_size=(3,))  # no source: every buffer
    np.testing.assert_array_equal(inp, [-1, -1, -1])


def test_zero_sized_work_and_buffers(fake):
    runner.CUDAProgram("add_val", ADD_PTX)([np.zeros(0, np.float32)] * 2, [1], global_size=(0, 1, 1))
    assert fake.calls == []  # no threads: no launch, the driver is not even initialised
    runner.CUDAProgram("add_val", ADD_PTX)([np.zeros(0, np.float32), np.zeros(0, np.float32)], [1],
                                           global_size=(1,))
    assert [a for c, a in fake.calls if c == "cuMemAlloc_v2"] == [(1,), (1,)]  # CUDA refuses 0-byte allocations
    assert "cuMemcpyHtoD_v2" not in fake.names() and "cuMemcpyDtoH_v2" not in fake.names()


# -- rulec's kernels through the fake driver: the interpreter plays the GPU -----------------------------------

NO_COMPILER = None if nvrtc.load() is not None or shutil.which("nvcc") else "no CUDA compiler (NVRTC or nvcc)"


@pytest.fixture()
def fake_gpu(fake, monkeypatch):
    """The fake driver, running each launched kernel with the reference interpreter on the device memory."""
    kernels: dict[str, Any] = {}  # PTX -> the lowered kernel it was compiled from
    compile_kernel = device_mod.compile_kernel

    def recording(ast, device):
        launch = compile_kernel(ast, device)
        kernels[launch.program.ptx] = launch.kernel
        return launch

    def run(ptx, name, bufs, vals, grid, block):
        k = kernels[ptx]
        dts = [numpy_dtype(g.dtype.base) for g in k.globals]
        arrays = [b[: b.size - b.size % dt.itemsize].view(dt) for b, dt in zip(bufs, dts)]
        interpret(k.ast, arrays, {v.arg[0]: x for v, x in zip(k.variables, vals)})

    monkeypatch.setattr(device_mod, "compile_kernel", recording)
    monkeypatch.setattr(device_mod, "_compiled", OrderedDict())
    fake.run = run
    return fake


A = np.arange(12, dtype=np.float32).reshape(3, 4)
B = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)


@pytest.mark.skipif(NO_COMPILER is not None, reason=str(NO_COMPILER))
def test_tensor_elementwise_and_matmul_through_the_fake_driver(fake_gpu):
    a, b = Tensor(A, device="CUDA"), Tensor(B, device="CUDA")
    np.testing.assert_allclose((a * 2 + 1).numpy(), A * 2 + 1)
    np.testing.assert_allclose((a @ b).numpy(), A @ B, rtol=1e-6, atol=1e-6)
    launches = fake_gpu.launches
    assert len(launches) >= 2
    for launch in launches:  # every kernel's PTX entry was launched by its name, with outputs copied back
        assert any(f".entry {launch['name']}(" in p for p in fake_gpu.modules.values())
    assert fake_gpu.mem == {}


@pytest.mark.skipif(NO_COMPILER is not None, reason=str(NO_COMPILER))
def test_a_tensor_on_a_second_gpu_launches_there(fake_gpu):
    fake_gpu.devices = 2
    np.testing.assert_allclose((Tensor(A, device="CUDA:1") * 3).numpy(), A * 3)
    assert ("cuDeviceGet", (1,)) in fake_gpu.calls and ("cuDeviceGet", (0,)) not in fake_gpu.calls


@pytest.mark.skipif(NO_COMPILER is not None, reason=str(NO_COMPILER))
@pytest.mark.parametrize("n", [1, 3, 10])
def test_a_symbolic_shape_passes_its_value_as_int32(fake_gpu, n):
    data = np.arange(40, dtype=np.float32).reshape(10, 4)
    v = UOp.variable("n", 1, 10).bind(n)
    t = Tensor(data, device="CUDA")
    t.realize()
    np.testing.assert_allclose(t.shrink(((0, v), None)).sum(0).numpy(), data[:n].sum(0))
    assert [("u32", n)] == [a for a in fake_gpu.launches[-1]["args"] if a[0] == "u32"]


# -- the driver is loaded only to run --------------------------------------------------------------------------

def test_the_driver_is_never_loaded_at_import_or_to_compile():
    code = r"""
import ctypes, ctypes.util, os
real = ctypes.CDLL
def guarded(name, *a, **kw):
    if os.path.basename(str(name)).startswith("libcuda"):
        raise AssertionError(f"the driver was loaded: {name}")
    return real(name, *a, **kw)
ctypes.CDLL = guarded
ctypes.util.find_library = (lambda f: lambda n: "libcuda.so.1" if n == "cuda" else f(n))(ctypes.util.find_library)
import numpy as np
from rulec import Tensor
from rulec.backends.cuda import driver, nvrtc, runner
from rulec.backends.device import compile_kernel
assert runner.driver_present()
a = Tensor(np.ones((4, 4), np.float32))
items = Tensor.schedule((a * 2).contiguous())
items[0].render("cuda")
if nvrtc.load() is not None or __import__("shutil").which("nvcc"):
    launch = compile_kernel(items[0].ast, "CUDA")
    assert ".entry " in launch.program.ptx
assert driver._driver is None
try:
    driver.current()
except AssertionError as e:
    print("refused:", e)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "refused: the driver was loaded: libcuda.so.1" in res.stdout  # the guard works when it is loaded


# -- a real GPU ------------------------------------------------------------------------------------------------

NO_DRIVER = None if runner.driver_present() else "no CUDA driver (libcuda) on this machine"


@pytest.fixture()
def real_gpu(monkeypatch):
    monkeypatch.setattr(device_mod, "_compiled", OrderedDict())
    yield
    driver.install(None)


@pytest.mark.skipif(NO_DRIVER is not None, reason=str(NO_DRIVER))
def test_real_gpu_elementwise(real_gpu):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    t = Tensor(x, device="CUDA")
    np.testing.assert_allclose((t * 3 - t.exp()).numpy(), x * 3 - np.exp(x), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(NO_DRIVER is not None, reason=str(NO_DRIVER))
def test_real_gpu_matmul(real_gpu):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((67, 129)).astype(np.float32), rng.standard_normal((129, 35)).astype(np.float32)
    out = (Tensor(a, device="CUDA") @ Tensor(b, device="CUDA")).numpy()
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(NO_DRIVER is not None, reason=str(NO_DRIVER))
def test_real_gpu_symbolic_sum(real_gpu):
    data = np.arange(40, dtype=np.float32).reshape(10, 4)
    t = Tensor(data, device="CUDA")
    t.realize()
    for n in (1, 7, 10):
        v = UOp.variable("n", 1, 10).bind(n)
        np.testing.assert_allclose(t.shrink(((0, v), None)).sum(0).numpy(), data[:n].sum(0))


# -- the ctypes calling convention, through a native stand-in for libcuda ---------------------------------------

STAND_IN = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef uint64_t CUdeviceptr;
static int inited, current;
/* what the last launch saw, read back by the test */
unsigned last_dims[6]; CUdeviceptr last_ptrs[2]; int last_val; unsigned long long last_bytes;
int cuInit(unsigned flags) { inited = flags == 0; return inited ? 0 : 1; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return ordinal == 0 ? 0 : 101; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)0x5000; return 0; }
int cuCtxSetCurrent(void *ctx) { current = ctx == (void *)0x5000; return current ? 0 : 201; }
int cuCtxSynchronize(void) { return current ? 0 : 201; }
int cuModuleLoadData(void **mod, const char *ptx) { *mod = (void *)0x6000; return strstr(ptx, ".entry add_val(") ? 0 : 218; }
int cuModuleGetFunction(void **fn, void *mod, const char *name) {
  *fn = (void *)0x7000; return mod == (void *)0x6000 && strcmp(name, "add_val") == 0 ? 0 : 500; }
int cuMemAlloc_v2(CUdeviceptr *p, size_t n) { last_bytes += n; *p = (CUdeviceptr)(uintptr_t)malloc(n); return 0; }
int cuMemFree_v2(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
int cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  if (f != (void *)0x7000 || shared || stream || extra) return 1;
  unsigned d[6] = {gx, gy, gz, bx, by, bz}; memcpy(last_dims, d, sizeof d);
  last_ptrs[0] = *(CUdeviceptr *)params[0]; last_ptrs[1] = *(CUdeviceptr *)params[1]; last_val = *(int *)params[2];
  float *out = (float *)(uintptr_t)last_ptrs[0], *in = (float *)(uintptr_t)last_ptrs[1];
  for (unsigned i = 0; i < 6; i++) out[i] = in[i] + last_val;  /* the test's buffers hold 6 floats */
  return 0;
}
int cuGetErrorName(int code, const char **s) { *s = "CUDA_ERROR_STAND_IN"; return 0; }
int cuGetErrorString(int code, const char **s) { *s = "the stand-in's error"; return 0; }
"""


def test_the_binding_calls_a_native_library_with_the_right_types(monkeypatch, tmp_path):
    from rulec.backends.c.runner import find_cc

    try:
        cc = find_cc()
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    (tmp_path / "cuda.c").write_text(STAND_IN)
    lib_path = tmp_path / "libcuda.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib_path), str(tmp_path / "cuda.c")], check=True)
    monkeypatch.setattr(driver.ctypes.util, "find_library", lambda name: str(lib_path) if name == "cuda" else None)
    monkeypatch.setattr(driver, "_driver", None)
    out, inp = np.zeros(6, np.float32), np.arange(6, dtype=np.float32)
    runner.CUDAProgram("add_val", ADD_PTX)([out, inp], [-3], global_size=(6, 1, 1), local_size=(4, 1, 1))
    np.testing.assert_array_equal(out, np.arange(6) - 3)
    lib = driver.current().lib
    assert list((ctypes.c_uint * 6).in_dll(lib, "last_dims")) == [2, 1, 1, 4, 1, 1]
    assert ctypes.c_int.in_dll(lib, "last_val").value == -3
    assert ctypes.c_ulonglong.in_dll(lib, "last_bytes").value == 48
    with pytest.raises(driver.CUDADriverError, match="cuModuleLoadData failed .the PTX of kernel 'other'.: error 218 "
                                                     "CUDA_ERROR_STAND_IN: the stand-in's error"):
        runner.CUDAProgram("other", ADD_PTX.replace("add_val", "other"))([out, inp], [1])
