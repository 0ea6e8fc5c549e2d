"""C kernels: compiled by the system C compiler into a shared library, cached on disk, called with ctypes.

The compiler is `$RULEC_CC` if set, else the first of cc, gcc, clang on PATH. `$RULEC_CFLAGS_EXTRA` is
appended to the flags (e.g. `-fsanitize=address`; see docs/backends.md for the ASan runtime it needs).
A library is named by the hash of compiler, flags and source, so a second process compiles nothing.
"""
from __future__ import annotations

import ctypes
import os
import platform
import shlex
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from rulec.backends.cache import atomic_output, cache_key, entry_path
from rulec.backends.errors import DeviceUnavailable, KernelCompileError
from rulec.backends.params import Param, check_call, kernel_params
from rulec.backends.toolchain import identity, which

BASE_FLAGS = ("-O2", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off")
# results must equal numpy's bit for bit: no fused multiply-add, and no -ffast-math; integers wrap as the
# IR says (runtime/ir/alu.py), so signed overflow must not be undefined behaviour the optimizer exploits


def find_cc() -> str:
    """The resolved path of the C compiler; DeviceUnavailable when there is none."""
    env = os.environ.get("RULEC_CC")
    if env:
        path = which(env)
        if path is None:
            raise DeviceUnavailable("CPU", f"RULEC_CC={env!r} is not an executable on this machine",
                                    "unset it to use cc, gcc or clang from PATH")
        return path
    for name in ("cc", "gcc", "clang"):
        path = which(name)
        if path:
            return path
    raise DeviceUnavailable("CPU", "no C compiler found (cc, gcc and clang are not on PATH)",
                            "kernels still render, and the PYTHON device runs them")


@lru_cache(maxsize=1)
def host_cpu() -> str:
    """What -march=native depends on: the CPU model and its feature flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [ln for ln in lines if ln.startswith(("model name", "flags", "Features", "CPU part"))]
    return "\n".join(dict.fromkeys(keep))  # one copy per distinct line, in order


# gcc's -O2 grows faster than linearly on one huge straight-line function (a chain of 20,000 ops: 10.6 s
# at -O2, 3.3 s at -O1); past this many source lines a kernel is compiled at -O1
LARGE_KERNEL_LINES = 4000


# a float16 select, the code that some assemblers cannot encode natively (GNU as 2.40 rejects the masked
# `vmovsh` that gcc 12 emits for it with AVX512-FP16, on short loops): see half_flags()
_HALF_PROBE = "".join(f"""void probe{n}(_Float16* restrict o, const _Float16* restrict a) {{
  for (int i = 0; i < {n}; i++) {{ _Float16 v = a[i]; o[i] = ((_Float16)0.0f < v) ? v : (_Float16)0.0f; }}
}}
""" for n in (3, 10))


@lru_cache(maxsize=None)
def half_flags(cc: str, native: tuple[str, ...]) -> tuple[str, ...]:
    """Extra flags for kernels with float16 values: `-mno-avx512fp16` where the toolchain cannot build
    float16 code for the native CPU's AVX512-FP16 (each op still rounds to float16 as its value is
    assigned: the kernels name every value), else none. Asked once per compiler and process."""
    if not native:
        return ()
    with tempfile.TemporaryDirectory() as tmp:
        if _builds(cc, (*native,), _HALF_PROBE, tmp) or not _builds(cc, (*native, "-mno-avx512fp16"), _HALF_PROBE, tmp):
            return ()
    return ("-mno-avx512fp16",)


def _builds(cc: str, flags: tuple[str, ...], source: str, folder: str) -> str | None:
    """The library `cc` builds from `source` with the kernel flags and `flags` (in `folder`), or None."""
    lib = os.path.join(folder, "p.so")
    cmd = [cc, *BASE_FLAGS, *flags, "-x", "c", "-", "-o", lib]
    return lib if subprocess.run(cmd, input=source, capture_output=True, text=True).returncode == 0 else None


_OPENMP_PROBE = """
void probe(float* a, int n) {
#pragma omp parallel for
  for (int i = 0; i < n; i++) a[i] = (float)i;
}
"""


@lru_cache(maxsize=None)
def openmp_flags(cc: str) -> tuple[str, ...]:
    """`-fopenmp` where `cc` builds and loads OpenMP code (gcc with libgomp; clang only with libomp
    installed), else none: the kernels' `#pragma omp` lines are then ignored and every kernel runs on one
    thread. Asked once per compiler and process."""
    with tempfile.TemporaryDirectory() as tmp:
        lib = _builds(cc, ("-fopenmp",), _OPENMP_PROBE, tmp)
        if lib is None:
            return ()
        # idle threads sleep rather than spin between kernels: Python runs between them, and on a loaded
        # machine spinning threads take the cores the work needs (read once, as OpenMP's runtime loads)
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            ctypes.CDLL(lib)
        except OSError:
            return ()
    return ("-fopenmp",)


def cflags(source: str = "") -> tuple[str, ...]:
    native = ("-march=native",) if platform.machine() in ("x86_64", "AMD64") else ()
    if "_Float16" in source:
        native += half_flags(find_cc(), native)
    if "#pragma omp" in source:  # a loop split among threads (backends/parallel.py)
        native += openmp_flags(find_cc())
    base = BASE_FLAGS
    if source.count("\n") > LARGE_KERNEL_LINES:
        base = tuple("-O1" if f == "-O2" else f for f in base)
    return base + native + tuple(shlex.split(os.environ.get("RULEC_CFLAGS_EXTRA", "")))


def _asan_ready(flags: tuple[str, ...]) -> None:
    """An ASan library loaded into a process without the ASan runtime kills it; say how to preload instead."""
    if not any(f.startswith("-fsanitize=") and "address" in f for f in flags):
        return
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return
    if "libasan" not in maps and "libclang_rt.asan" not in maps:
        raise DeviceUnavailable("CPU", "kernels built with -fsanitize=address need the ASan runtime loaded first",
                                "start Python with LD_PRELOAD=$(cc -print-file-name=libasan.so) "
                                "ASAN_OPTIONS=detect_leaks=0")


def asan_runtime() -> str | None:
    """The ASan runtime of the chosen compiler (to put in LD_PRELOAD of a process that loads ASan kernels):
    gcc's libasan.so, or clang's libclang_rt.asan-<arch>.so; None when that compiler has none installed."""
    cc = find_cc()
    libs = ["libasan.so", f"libclang_rt.asan-{platform.machine()}.so"]
    if "clang" in identity(cc):  # clang can find gcc's libasan too, but its kernels need its own runtime
        libs = libs[1:]
    for lib in libs:
        res = subprocess.run([cc, f"-print-file-name={lib}"], capture_output=True, text=True)
        path = res.stdout.strip()
        if res.returncode == 0 and os.path.isabs(path) and os.path.exists(path):
            return path
    return None


class CProgram:
    """One compiled C kernel. Calls check their arguments against the kernel's parameters."""

    def __init__(self, name: str, source: str, library: Path) -> None:
        self.name, self.source, self.library = name, source, library
        self.params: list[Param] | None = kernel_params(source, name)
        self.lib = ctypes.CDLL(str(library))
        try:
            self.fn = getattr(self.lib, name)
        except AttributeError:
            raise KernelCompileError(name, "C", source, f"the library defines no function named {name!r}") from None
        self.fn.restype = None
        if self.params is not None:
            self.fn.argtypes = [ctypes.c_void_p if p.pointer else ctypes.c_int for p in self.params]
        # the arrays of the last call, held so their data can't move (resize refuses a referenced array),
        # with their pointers: reading .ctypes.data costs ~1-3 us per array
        self._arrays: tuple[np.ndarray, ...] = ()
        self._ids: tuple[int, ...] | None = None
        self._nvals = -1
        self._dtypes: tuple[np.dtype, ...] = ()
        self._ptrs: tuple[int, ...] = ()

    def __call__(self, buffers: Sequence[np.ndarray], vals: Sequence[int] = ()) -> None:
        # fast path: the same array objects as last call (ids can't be reused: the arrays are held), still
        # contiguous and of the same dtype (both can be reassigned in place); the value count is checked too
        if tuple(map(id, buffers)) == self._ids and len(vals) == self._nvals \
                and all(b.flags.c_contiguous and b.dtype is d for b, d in zip(buffers, self._dtypes)):
            self.fn(*self._ptrs, *vals)
            return
        buffers, vals = tuple(buffers), tuple(vals)
        check_call(self.name, self.params, buffers, vals)
        if self.params is None:  # signature not found in the source: type the call from its arguments
            self.fn.argtypes = [ctypes.c_void_p] * len(buffers) + [ctypes.c_int] * len(vals)
        self._arrays, self._ids, self._nvals = buffers, tuple(map(id, buffers)), len(vals)
        self._dtypes, self._ptrs = tuple(b.dtype for b in buffers), tuple(b.ctypes.data for b in buffers)
        self.fn(*self._ptrs, *vals)


_programs: dict[tuple, CProgram] = {}


def compile_c(name: str, source: str) -> CProgram:
    """The compiled kernel `name` of `source`: from this process's memo, else the disk cache, else the compiler."""
    cc, flags = find_cc(), cflags(source)
    memo = (name, source, cc, flags)
    prog = _programs.get(memo)
    if prog is not None:
        return prog
    _asan_ready(flags)
    ident = identity(cc) + ("\n" + host_cpu() if "-march=native" in flags else "")
    path = entry_path(cache_key("c", ident, flags, source), ".so")
    if not path.exists():
        cmd = [cc, *flags, "-x", "c", "-", "-o", "OUT.so", "-lm"]
        with atomic_output(path) as tmp:
            cmd[-2] = str(tmp)
            res = subprocess.run(cmd, input=source, capture_output=True, text=True)
            if res.returncode != 0:
                shown = " ".join(shlex.quote(c) for c in cmd[:-3]) + " -o K.so -lm"
                raise KernelCompileError(name, "C", source, res.stderr or res.stdout, shown)
    prog = _programs[memo] = CProgram(name, source, path)
    if len(_programs) > 4096:  # bounded: the oldest entry goes (its library stays loaded: ctypes never unloads)
        del _programs[next(iter(_programs))]
    return prog
