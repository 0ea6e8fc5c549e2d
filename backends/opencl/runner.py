"""OpenCL kernels through pyopencl, on the first platform present (here Debian's PoCL on the CPU).

One context and queue per process, made on first use. Built programs are memoized by a hash of name and
source; PoCL keeps its own disk cache of binaries (~/.cache/pocl).
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from rulec.backends.errors import DeviceUnavailable, KernelCompileError
from rulec.backends.params import Param, check_call, kernel_params

_STILL = "kernels still render for OpenCL; the CPU and PYTHON devices run them"
_state: dict[str, Any] = {}


def _cl() -> Any:
    try:
        import pyopencl
    except ImportError as e:
        raise DeviceUnavailable("CL", f"pyopencl is not installed ({e})",
                                f"`pip install pyopencl` and an OpenCL platform (e.g. pocl-opencl-icd); {_STILL}")
    return pyopencl


def context() -> tuple[Any, Any, Any]:
    """(pyopencl, context, queue) of this process, made on first use from the first platform's first device."""
    if "queue" not in _state:
        cl = _cl()
        try:
            platforms = cl.get_platforms()
        except cl.Error as e:  # the ICD loader reports "no platform" as an error
            raise DeviceUnavailable("CL", f"no OpenCL platform found ({e})",
                                    f"install one (on Debian: pocl-opencl-icd); {_STILL}") from None
        devices = [d for p in platforms for d in p.get_devices()]
        if not devices:
            raise DeviceUnavailable("CL", f"the OpenCL platforms ({', '.join(p.name for p in platforms)}) "
                                    "have no devices", _STILL)
        ctx = cl.Context(devices=devices[:1])
        _state.update(cl=cl, ctx=ctx, queue=cl.CommandQueue(ctx), device=devices[0])
    return _state["cl"], _state["ctx"], _state["queue"]


class CLProgram:
    """One built OpenCL kernel. Buffers are copied in, the kernel is launched, the outputs copied back."""

    def __init__(self, name: str, source: str, program: Any) -> None:
        self.name, self.source, self.program = name, source, program
        self.params: list[Param] | None = kernel_params(source, name)
        self.kernel = getattr(program, name)
        # by default the written buffers are the non-const pointers
        self.written = None if self.params is None else \
            tuple(i for i, p in enumerate(p for p in self.params if p.pointer) if not p.const)

    def __call__(self, buffers: Sequence[np.ndarray], vals: Sequence[int] = (), *,
                 global_size: Sequence[int], local_size: Sequence[int] | None = None,
                 outputs: Sequence[int] | None = None) -> None:
        # OpenCL holds bool buffers as uchar (backend.yaml's storage_types): the same bytes, seen as uint8
        buffers = tuple(b.view(np.uint8) if isinstance(b, np.ndarray) and b.dtype == np.bool_ else b for b in buffers)
        vals = tuple(vals)
        check_call(self.name, self.params, buffers, vals)
        outs = tuple(range(len(buffers))) if outputs is None and self.written is None else \
            tuple(self.written if outputs is None else outputs)
        for i in outs:
            if not buffers[i].flags.writeable:
                raise ValueError(f"kernel {self.name!r}: output buffer {i} is read-only")
        if any(g == 0 for g in global_size):
            return
        cl, ctx, queue = context()
        mf = cl.mem_flags
        # a zero-size buffer is invalid in OpenCL: give it one byte the kernel never touches
        devbufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=b) if b.nbytes else
                   cl.Buffer(ctx, mf.READ_WRITE, 1) for b in buffers]
        args = [*devbufs, *(np.int32(v) for v in vals)]
        self.kernel(queue, tuple(global_size), None if local_size is None else tuple(local_size), *args)
        for i in outs:
            if buffers[i].nbytes:
                cl.enqueue_copy(queue, buffers[i], devbufs[i])
        queue.finish()
        for d in devbufs:
            d.release()


_programs: dict[str, CLProgram] = {}


def compile_cl(name: str, source: str) -> CLProgram:
    """The built kernel `name` of `source`; a build failure is a KernelCompileError with the build log."""
    key = hashlib.sha256(f"{name}\0{source}".encode()).hexdigest()
    prog = _programs.get(key)
    if prog is not None:
        return prog
    cl, ctx, _ = context()
    try:
        built = cl.Program(ctx, source).build()
    except cl.RuntimeError as e:  # pyopencl puts the device's build log in the message
        device = _state["device"]
        raise KernelCompileError(name, "OpenCL", source, str(e),
                                 f"clBuildProgram on {device.platform.name} / {device.name}") from None
    try:
        prog = CLProgram(name, source, built)
    except (AttributeError, cl.Error):
        raise KernelCompileError(name, "OpenCL", source, f"the program defines no kernel named {name!r}") from None
    _programs[key] = prog
    return prog
