"""A small ctypes binding of the CUDA driver API (libcuda), enough to run one PTX kernel over host arrays.

libcuda is loaded on the first launch, never at import and never to compile: CI machines have no driver.
The process keeps one Driver: the primary context of each device it used, and a module per (device, PTX).
The library object is injectable (`install`), so the launch sequence is tested with a fake library in Python.

A launch: copy every buffer to device memory, launch with the kernel parameters as an array of pointers
(the buffers' device pointers, then the int32 values, as the CUDA template declares them), synchronize,
copy back the outputs, free.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import threading
from typing import Any, Sequence

import numpy as np

from rulec.backends.errors import DeviceUnavailable

_CUdeviceptr = ctypes.c_uint64
_p = ctypes.POINTER
# the calls used, as (restype, argtypes): set on the real library so ctypes converts Python ints
SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [ctypes.c_uint],
    "cuDeviceGetCount": [_p(ctypes.c_int)],
    "cuDeviceGet": [_p(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [_p(ctypes.c_void_p), ctypes.c_int],
    "cuCtxSetCurrent": [ctypes.c_void_p],
    "cuCtxSynchronize": [],
    "cuModuleLoadData": [_p(ctypes.c_void_p), ctypes.c_char_p],
    "cuModuleGetFunction": [_p(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p],
    "cuMemAlloc_v2": [_p(_CUdeviceptr), ctypes.c_size_t],
    "cuMemFree_v2": [_CUdeviceptr],
    "cuMemcpyHtoD_v2": [_CUdeviceptr, ctypes.c_void_p, ctypes.c_size_t],
    "cuMemcpyDtoH_v2": [ctypes.c_void_p, _CUdeviceptr, ctypes.c_size_t],
    "cuLaunchKernel": [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                       ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, _p(ctypes.c_void_p), _p(ctypes.c_void_p)],
    "cuGetErrorName": [ctypes.c_int, _p(ctypes.c_char_p)],
    "cuGetErrorString": [ctypes.c_int, _p(ctypes.c_char_p)],
}
CUDA_ERROR_NO_DEVICE = 100

# the hardware's limits on launch sizes (every GPU since compute capability 3.0)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_THREADS = 256  # threads per block when the caller gives no local size


class CUDADriverError(RuntimeError):
    """A driver call that returned a non-zero CUresult: names the call, the code and the driver's words."""

    def __init__(self, call: str, code: int, name: str, text: str, context: str = "") -> None:
        self.call, self.code, self.name, self.text = call, code, name, text
        where = f" ({context})" if context else ""
        super().__init__(f"CUDA driver call {call} failed{where}: error {code} {name}: {text}")


def load_library() -> Any:
    """libcuda, with the argument types of the calls used set; DeviceUnavailable when it can't be loaded."""
    path = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise DeviceUnavailable("CUDA", f"the GPU driver library could not be loaded ({e})",
                                "kernels still render and compile to PTX checked by ptxas") from None
    for call, argtypes in SIGNATURES.items():
        fn = getattr(lib, call)
        fn.restype, fn.argtypes = ctypes.c_int, argtypes
    return lib


def launch_dims(global_size: Sequence[int], local_size: Sequence[int] | None
                ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) covering `global_size` threads per dimension: grid = ceil(global / local), as the CUDA
    template's thread id is blockIdx*blockDim+threadIdx, bounds-checked against the global size."""
    gs = _three("global_size", global_size)
    if local_size is None:
        block = _default_block(gs)
    else:
        block = _three("local_size", local_size)
        if any(b < 1 for b in block):
            raise ValueError(f"local_size {tuple(local_size)} must be positive in every dimension")
    if any(b > m for b, m in zip(block, MAX_BLOCK)) or math.prod(block) > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"local_size {block} exceeds CUDA's block limits {MAX_BLOCK} "
                         f"(at most {MAX_THREADS_PER_BLOCK} threads) for global_size {gs}")
    grid = tuple(-(-g // b) for g, b in zip(gs, block))
    if any(g > m for g, m in zip(grid, MAX_GRID)):
        raise ValueError(f"global_size {gs} with local_size {block} needs the grid {grid}, over CUDA's "
                         f"limits {MAX_GRID}")
    return grid, block  # type: ignore[return-value]


def _three(arg: str, size: Sequence[int]) -> tuple[int, int, int]:
    size = tuple(int(s) for s in size)
    if not 1 <= len(size) <= 3 or any(s < 0 for s in size):
        raise ValueError(f"{arg} {size} must have 1 to 3 non-negative sizes")
    return (size + (1, 1))[:3]  # type: ignore[return-value]


def _default_block(gs: tuple[int, int, int]) -> tuple[int, int, int]:
    # x first (consecutive threads read consecutive elements), then what is left of the budget to y, z
    bx = max(1, min(gs[0], DEFAULT_THREADS))
    by = max(1, min(gs[1], DEFAULT_THREADS // bx))
    bz = max(1, min(gs[2], DEFAULT_THREADS // (bx * by), MAX_BLOCK[2]))
    return bx, by, bz


def pack_params(pointers: Sequence[int], vals: Sequence[int]) -> tuple[Any, list[Any]]:
    """The kernelParams array of cuLaunchKernel (one pointer to each argument's value: device pointers as
    CUdeviceptr, then values as int32) and the argument objects, which must outlive the launch call."""
    args: list[Any] = [_CUdeviceptr(p) for p in pointers] + [ctypes.c_int32(v) for v in vals]
    params = (ctypes.c_void_p * max(1, len(args)))(*[ctypes.addressof(a) for a in args])
    return params, args


class Driver:
    """The process's use of one loaded driver library (real, or a fake for tests)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.initialized = False
        self.contexts: dict[int, ctypes.c_void_p] = {}
        self.modules: dict[tuple[int, str], ctypes.c_void_p] = {}
        self.functions: dict[tuple[int, str, str], ctypes.c_void_p] = {}

    def check(self, call: str, status: int, context: str = "") -> None:
        if status != 0:
            raise CUDADriverError(call, int(status), *self.describe(int(status)), context)

    def describe(self, code: int) -> tuple[str, str]:
        """(name, text) of a CUresult, as the driver words them."""
        out = []
        for call in ("cuGetErrorName", "cuGetErrorString"):
            text = ctypes.c_char_p()
            ok = getattr(self.lib, call)(code, ctypes.byref(text)) == 0 and text.value
            out.append(text.value.decode(errors="replace") if ok else "(unknown to the driver)")
        return out[0], out[1]

    def context(self, ordinal: int) -> ctypes.c_void_p:
        """The primary context of device `ordinal`, retained once per process, made current on this thread."""
        if os.getpid() != self.pid:
            raise DeviceUnavailable("CUDA", "the driver was initialised in a parent process, and CUDA cannot be "
                                    "used after fork", "use the spawn start method for worker processes")
        if not self.initialized:
            status = self.lib.cuInit(0)
            if status == CUDA_ERROR_NO_DEVICE:
                raise DeviceUnavailable("CUDA", "the GPU driver is installed but finds no GPU "
                                        f"(cuInit: {' '.join(self.describe(status))})",
                                        "kernels still render and compile to PTX checked by ptxas")
            self.check("cuInit", status)
            self.initialized = True
        ctx = self.contexts.get(ordinal)
        if ctx is None:
            count = ctypes.c_int()
            self.check("cuDeviceGetCount", self.lib.cuDeviceGetCount(ctypes.byref(count)))
            if not 0 <= ordinal < count.value:
                raise DeviceUnavailable("CUDA", f"device CUDA:{ordinal} was asked for, but the driver sees "
                                        f"{count.value} GPU(s)")
            dev = ctypes.c_int()
            self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), f"CUDA:{ordinal}")
            ctx = ctypes.c_void_p()
            self.check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value),
                       f"CUDA:{ordinal}")
            self.contexts[ordinal] = ctx
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(ctx), f"CUDA:{ordinal}")
        return ctx

    def function(self, ordinal: int, ptx: str, name: str) -> ctypes.c_void_p:
        """The kernel `name` of `ptx` on device `ordinal`; the module is loaded once per device and PTX."""
        self.context(ordinal)
        fn = self.functions.get((ordinal, ptx, name))
        if fn is not None:
            return fn
        module = self.modules.get((ordinal, ptx))
        if module is None:
            module = ctypes.c_void_p()
            self.check("cuModuleLoadData", self.lib.cuModuleLoadData(ctypes.byref(module), ptx.encode()),
                       f"the PTX of kernel {name!r}")
            self.modules[(ordinal, ptx)] = module
        fn = ctypes.c_void_p()
        self.check("cuModuleGetFunction", self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
                   f"kernel {name!r}")
        self.functions[(ordinal, ptx, name)] = fn
        return fn

    def run(self, ordinal: int, ptx: str, name: str, buffers: Sequence[np.ndarray], vals: Sequence[int],
            grid: tuple[int, int, int], block: tuple[int, int, int], outputs: Sequence[int]) -> None:
        """Copy `buffers` in, launch `name` over `grid` x `block`, synchronize, copy `outputs` back, free."""
        with self.lock:
            fn = self.function(ordinal, ptx, name)
            pointers: list[int] = []
            failed = True
            try:
                for b in buffers:
                    pointers.append(self._alloc(max(1, b.nbytes)))  # a zero-size allocation is an error
                    if b.nbytes:
                        self.check("cuMemcpyHtoD_v2", self.lib.cuMemcpyHtoD_v2(pointers[-1], b.ctypes.data, b.nbytes))
                params, args = pack_params(pointers, vals)  # args hold the values until the call returns
                self.check("cuLaunchKernel", self.lib.cuLaunchKernel(fn, *grid, *block, 0, None, params, None),
                           f"kernel {name!r}, grid {grid}, block {block}")
                # errors while the kernel runs (a bad address) surface here, named by the kernel
                self.check("cuCtxSynchronize", self.lib.cuCtxSynchronize(), f"after kernel {name!r}")
                for i in outputs:
                    if buffers[i].nbytes:
                        self.check("cuMemcpyDtoH_v2", self.lib.cuMemcpyDtoH_v2(buffers[i].ctypes.data, pointers[i],
                                                                               buffers[i].nbytes))
                failed = False
            finally:
                self._free(pointers, quiet=failed)

    def _alloc(self, nbytes: int) -> int:
        ptr = _CUdeviceptr()
        self.check("cuMemAlloc_v2", self.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes), f"{nbytes} bytes")
        return ptr.value

    def _free(self, pointers: list[int], quiet: bool) -> None:
        # every pointer is freed; after a failure the first error is the one to report (freeing in a
        # broken context fails too), else the first failed free is raised
        statuses = [self.lib.cuMemFree_v2(p) for p in pointers]
        if not quiet:
            for status in statuses:
                self.check("cuMemFree_v2", status)


_driver: Driver | None = None
_driver_lock = threading.Lock()


def current() -> Driver:
    """The process's Driver, loading libcuda on first use."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver(load_library())
        return _driver


def install(lib: Any | None) -> Driver | None:
    """Use `lib` (an object with the calls of SIGNATURES) as the driver library from now on; None forgets
    it, so the next launch loads libcuda. For tests."""
    global _driver
    with _driver_lock:
        _driver = None if lib is None else Driver(lib)
        return _driver
