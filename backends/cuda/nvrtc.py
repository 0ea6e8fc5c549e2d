"""NVRTC (CUDA source -> PTX in process) through ctypes, when the pip wheel `nvidia-cuda-nvrtc` or a system
libnvrtc is present. Needs no GPU and no driver."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from functools import lru_cache


def _wheel_libs() -> list[str]:
    """libnvrtc.so.* shipped by the nvidia-* wheels (nvidia/cu13/lib, or nvidia/cuda_nvrtc/lib before 13)."""
    try:
        import nvidia  # a namespace package
    except ImportError:
        return []
    found = []
    for root in getattr(nvidia, "__path__", []):
        found += sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*")), reverse=True)
    return found


@lru_cache(maxsize=1)
def load() -> tuple[ctypes.CDLL, str] | None:
    """(libnvrtc, its path), or None when no NVRTC is found."""
    for path in [*_wheel_libs(), ctypes.util.find_library("nvrtc")]:
        if not path:
            continue
        # libnvrtc dlopens its builtins library by name: load the one beside it first, globally
        for builtins in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*")):
            if ".alt." not in builtins:
                try:
                    ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass
        try:
            return ctypes.CDLL(path), path
        except OSError:
            continue
    return None


def version() -> str:
    lib, path = load() or (None, "")
    if lib is None:
        return "none"
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"nvrtc {major.value}.{minor.value} {os.path.realpath(path)}"


def compile_ptx(name: str, source: str, options: list[str]) -> tuple[str | None, str]:
    """(PTX or None on failure, the compile log)."""
    found = load()
    assert found is not None, "compile_ptx needs NVRTC: check load() first"
    lib = found[0]
    prog = ctypes.c_void_p()
    status = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None)
    if status != 0:
        return None, f"nvrtcCreateProgram failed with status {status}"
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        logbuf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, logbuf)
        log = logbuf.value.decode(errors="replace")
        if status != 0:
            return None, log or f"nvrtcCompileProgram failed with status {status}"
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        if lib.nvrtcGetPTX(prog, ptx) != 0:
            return None, log or "nvrtcGetPTX failed"
        return ptx.value.decode(), log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
