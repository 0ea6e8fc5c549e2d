"""CUDA kernels: source -> PTX with NVRTC (in process) or nvcc, validated by ptxas when present, cached on
disk. Running goes through the GPU driver (driver.py), loaded on the first launch only; its absence is a
DeviceUnavailable, and the driver is never loaded to find out (CI machines have none)."""
from __future__ import annotations

import ctypes.util
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from rulec.backends.cache import cache_key, read_text, write_text
from rulec.backends.cuda import driver, nvrtc
from rulec.backends.errors import DeviceUnavailable, KernelCompileError
from rulec.backends.params import Param, check_call, kernel_params
from rulec.backends.toolchain import identity, which


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def _nvcc_ptx(name: str, source: str, arch: str, nvcc: str) -> str:
    with tempfile.TemporaryDirectory(prefix="rulec-cuda-") as tmp:
        cu, ptx = Path(tmp, f"{name}.cu"), Path(tmp, f"{name}.ptx")
        cu.write_text(source)
        cmd = [nvcc, "-ptx", f"-arch={arch}", str(cu), "-o", str(ptx)]
        res = _run(cmd)
        if res.returncode != 0:
            raise KernelCompileError(name, "CUDA", source, res.stderr + res.stdout, shlex.join(cmd))
        return ptx.read_text()


def _validate(name: str, source: str, ptx: str, arch: str, ptxas: str) -> None:
    with tempfile.TemporaryDirectory(prefix="rulec-ptx-") as tmp:
        path = Path(tmp, f"{name}.ptx")
        path.write_text(ptx)
        cmd = [ptxas, f"-arch={arch}", "-o", os.devnull, str(path)]
        res = _run(cmd)
    if res.returncode != 0:
        log = f"ptxas rejected the PTX:\n{res.stderr}{res.stdout}\nPTX:\n{ptx}"
        raise KernelCompileError(name, "CUDA", source, log, shlex.join(cmd))


def compile_cuda(name: str, source: str, arch: str = "sm_90") -> str:
    """The PTX of `source` for `arch`, checked by ptxas when it is on PATH; cached on disk."""
    nvcc = None if nvrtc.load() else which("nvcc")
    if nvcc is None and nvrtc.load() is None:
        raise DeviceUnavailable("CUDA", "no CUDA compiler found (neither NVRTC from the pip wheel "
                                "nvidia-cuda-nvrtc nor nvcc)", "kernels still render as CUDA source")
    ptxas = which("ptxas")
    compiler = nvrtc.version() if nvcc is None else identity(nvcc)
    checker = identity(ptxas) if ptxas else "no ptxas"
    key = cache_key("cuda", f"{compiler}\n{checker}", [arch], source)
    ptx = read_text(key, ".ptx")
    if ptx is not None:
        return ptx
    if nvcc is None:
        options = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}"]  # a virtual arch gives PTX
        ptx, log = nvrtc.compile_ptx(name, source, options)
        if ptx is None:
            raise KernelCompileError(name, "CUDA", source, log, f"nvrtc {' '.join(options)}")
    else:
        ptx = _nvcc_ptx(name, source, arch, nvcc)
    if ptxas:
        _validate(name, source, ptx, arch, ptxas)
    write_text(key, ".ptx", ptx)
    return ptx


def driver_present() -> bool:
    """Whether a CUDA driver library is installed; found by name only, never loaded."""
    return ctypes.util.find_library("cuda") is not None


_PTX_POINTER, _PTX_INT32 = (".u64", ".b64", ".s64"), (".u32", ".s32", ".b32")


def ptx_params(ptx: str, name: str) -> list[str] | None:
    """The PTX types of the parameters of the entry `name` (".u64" for a pointer, ".u32"/".s32" for an int),
    or None when the PTX has no such entry."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        return None
    return re.findall(r"\.param\s+(\.[a-z]\d+)", m.group(1))


def device_ordinal(device: str) -> int:
    """The GPU number of a device string: "CUDA" is 0, "CUDA:1" is 1."""
    _, _, num = device.partition(":")
    if num and not num.isdigit():
        raise ValueError(f"device {device!r}: the part after ':' must be a GPU number such as CUDA:1")
    return int(num or 0)


class CUDAProgram:
    """A compiled CUDA kernel (its PTX). Running loads the GPU driver (backends/cuda/driver.py) on first use;
    `source`, when given, lets a call be checked against the kernel's declared element types too."""

    def __init__(self, name: str, ptx: str, source: str | None = None, device: str = "CUDA") -> None:
        self.name, self.ptx, self.device = name, ptx, device
        self.ordinal = device_ordinal(device)
        self.ptx_types = ptx_params(ptx, name)
        self.params: list[Param] | None = kernel_params(source, name) if source else None

    def __call__(self, buffers: Sequence[np.ndarray], vals: Sequence[int] = (), *,
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
                 outputs: Sequence[int] | None = None) -> None:
        if not driver_present():
            raise DeviceUnavailable("CUDA", "no GPU driver on this machine (libcuda not found)",
                                    "kernels still render and compile to PTX checked by ptxas")
        buffers, vals = tuple(buffers), tuple(vals)
        check_call(self.name, self.params, buffers, vals)
        self._check_ptx(buffers, vals)
        outs = self._outputs(buffers, outputs)
        grid, block = driver.launch_dims(global_size, local_size)
        if 0 in grid:
            return
        driver.current().run(self.ordinal, self.ptx, self.name, buffers, vals, grid, block, outs)

    def _check_ptx(self, buffers: tuple, vals: tuple) -> None:
        # a wrong argument count would make the driver read parameters from memory we never wrote
        if self.ptx_types is None:
            raise ValueError(f"the PTX has no entry named {self.name!r}")
        want = [_PTX_POINTER] * len(buffers) + [_PTX_INT32] * len(vals)
        if len(want) != len(self.ptx_types) or not all(t in w for t, w in zip(self.ptx_types, want)):
            raise ValueError(f"kernel {self.name!r} takes the parameters ({', '.join(self.ptx_types)}) in its PTX, "
                             f"got {len(buffers)} buffers and {len(vals)} values")
        for i, v in enumerate(vals):  # passed as int32: a wider value would be cut silently
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not -2**31 <= int(v) < 2**31:
                raise ValueError(f"kernel {self.name!r}: value {i} must be an int that fits 32 bits, got {v!r}")

    def _outputs(self, buffers: tuple, outputs: Sequence[int] | None) -> tuple[int, ...]:
        if outputs is None:  # the non-const pointers when the source is known, else every buffer
            ptrs = None if self.params is None else [p for p in self.params if p.pointer]
            outs = tuple(range(len(buffers))) if ptrs is None else tuple(i for i, p in enumerate(ptrs) if not p.const)
        else:
            outs = tuple(outputs)
        for i in outs:
            if not 0 <= i < len(buffers):
                raise ValueError(f"kernel {self.name!r}: output {i} is not one of its {len(buffers)} buffers")
            if not buffers[i].flags.writeable:
                raise ValueError(f"kernel {self.name!r}: output buffer {i} is read-only")
        return outs
