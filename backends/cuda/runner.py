"""CUDA kernels: source -> PTX with NVRTC (in process) or nvcc, validated by ptxas when present, cached on
disk. Running needs a GPU driver; its absence is a DeviceUnavailable, and the driver is never loaded to find
out (CI machines have none)."""
from __future__ import annotations

import ctypes.util
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from rulec.backends.cache import cache_key, read_text, write_text
from rulec.backends.cuda import nvrtc
from rulec.backends.errors import DeviceUnavailable, KernelCompileError
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


class CUDAProgram:
    """A compiled CUDA kernel (its PTX). Running needs a GPU driver."""

    def __init__(self, name: str, ptx: str) -> None:
        self.name, self.ptx = name, ptx

    def __call__(self, buffers: Sequence[np.ndarray], vals: Sequence[int] = (), *,
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
                 outputs: Sequence[int] | None = None) -> None:
        if not driver_present():
            raise DeviceUnavailable("CUDA", "no GPU driver on this machine (libcuda not found)",
                                    "kernels still render and compile to PTX checked by ptxas")
        raise DeviceUnavailable("CUDA", "a GPU driver is installed, but launching through it is not built yet",
                                "kernels still render and compile to PTX checked by ptxas")
