"""Devices, as tinygrad names them, and running a scheduled kernel on one.

    CPU     compiled C (the default)          CL      OpenCL (pyopencl; PoCL on the CPU here)
    CUDA    CUDA, compiled to PTX             METAL   Metal Shading Language (checked here)
    PYTHON  the numpy reference interpreter, kept as the oracle

An instance of a device (`CPU:1`, `CL:1`: runtime/device.py) has its own buffers and is run by its
backend's runner; a kernel is compiled once per backend, whichever instance runs it.

The default is `$DEV` (tinygrad 0.14's variable), else CPU. Buffers of every device are kept in host
memory (numpy arrays, runtime/buffers.py): a GPU runner copies them in and the outputs back. CUDA without
a driver and METAL off macOS still render and compile; running raises `DeviceUnavailable`.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from rulec.backends.errors import DeviceUnavailable
from rulec.backends.render import backend, kernel_name
from rulec.runtime.codegen.lower import lower
from rulec.runtime.device import DEVICES, Device, backend_of, canonical
from rulec.runtime.engine.trace import active_trace
from rulec.runtime.ir.uop import UOp

LANGUAGE = {"CPU": "c", "CL": "opencl", "CUDA": "cuda", "METAL": "metal"}


def compile_kernel(ast: UOp, device: str) -> Any:
    """The program that runs `ast` on `device` (compiled and cached by the device's runner)."""
    instance, device = canonical(device), backend_of(device)
    language = LANGUAGE[device]
    b = backend(language)
    k = lower(ast, b.target)
    name = kernel_name(ast)
    src = b.render(k, name)
    if device == "CPU":
        from rulec.backends.c.runner import compile_c

        return _Launch(compile_c(name, src), k, device)
    if device == "CL":
        from rulec.backends.opencl.runner import compile_cl

        return _Launch(compile_cl(name, src), k, device)
    if device == "CUDA":
        from rulec.backends.cuda.runner import CUDAProgram, compile_cuda

        # a launch goes to the GPU the instance names (CUDA:1 is GPU 1); the PTX is shared
        return _Launch(CUDAProgram(name, compile_cuda(name, src), source=src, device=instance), k, device)
    from rulec.backends.metal.check import MetalProgram

    return _Launch(MetalProgram(name, src), k, device)


class _Launch:
    """A compiled program with what its launch needs: the thread-id sizes and which buffers it writes."""

    def __init__(self, program: Any, kernel: Any, device: str):
        self.program, self.kernel, self.device = program, kernel, device

    def __call__(self, arrays: Sequence[np.ndarray], vals: Sequence[int]) -> None:
        if self.device == "CPU":
            self.program(arrays, vals)
        else:
            self.program(arrays, vals, global_size=self.kernel.global_size, outputs=self.kernel.outputs)


# compiled programs by kernel and device, most recently used last; bounded, so that a long-running process
# (a hypothesis run schedules thousands of distinct kernels) does not keep every kernel it ever ran
MAX_COMPILED = 2048
_compiled: OrderedDict[tuple[UOp, str], _Launch] = OrderedDict()


def run_kernel(ast: UOp, arrays: Sequence[np.ndarray], var_vals: dict[str, int], device: str) -> None:
    """Run one kernel on `device` over the flat arrays of its buffers (DEFINE_GLOBAL order)."""
    instance, device = canonical(device), backend_of(device)  # instances share their backend's programs,
    trace = active_trace()
    t0 = time.perf_counter() if trace is not None else 0.0
    if device == "PYTHON":
        from rulec.runtime.interpret.interpret import run_kernel as interpret

        interpret(ast, list(arrays), var_vals)
        if trace is not None:
            trace.kernel_ran(kernel_name(ast), ast, device, time.perf_counter() - t0)
        return
    key = (ast, instance if device == "CUDA" else device)  # but a CUDA launch is bound to its GPU
    launch = _compiled.get(key)
    if launch is None:
        launch = _compiled[key] = compile_kernel(ast, instance)
        if len(_compiled) > MAX_COMPILED:
            _compiled.popitem(last=False)
        if trace is not None:
            t1 = time.perf_counter()
            trace.kernel_compiled(kernel_name(ast), ast, device, t1 - t0)
            t0 = t1
    else:
        _compiled.move_to_end(key)
    _check_distinct(arrays)
    missing = [v.arg[0] for v in launch.kernel.variables if v.arg[0] not in var_vals]
    if missing:
        raise ValueError(f"kernel needs values for the variables {missing}")
    launch(arrays, [int(var_vals[v.arg[0]]) for v in launch.kernel.variables])
    if trace is not None:
        trace.kernel_ran(kernel_name(ast), ast, device, time.perf_counter() - t0)


def _check_distinct(arrays: Sequence[np.ndarray]) -> None:
    # kernels declare their buffers `restrict`: two parameters must never share memory
    if len(arrays) > 1 and len({a.ctypes.data for a in arrays if a.nbytes}) != sum(1 for a in arrays if a.nbytes):
        raise RuntimeError("a kernel was given the same memory as two buffers")


__all__ = ["Device", "DEVICES", "DeviceUnavailable", "backend_of", "canonical", "compile_kernel", "run_kernel"]
