"""A semantic check of Metal kernels on machines without Metal.

Two steps. First every `[[attribute]]` is checked against MSL's names (a misspelt one would be ignored by
clang with a warning, and by Metal rejected). Then the attributes are blanked out and clang compiles the
source as C++ for OpenCL against `shim/metal_stdlib`, a stand-in header: MSL's address spaces map onto
OpenCL's, so a pointer in the wrong address space, `double`, or a kernel returning a value is an error.
"""
from __future__ import annotations

import difflib
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from rulec.backends.errors import DeviceUnavailable, KernelCompileError
from rulec.backends.toolchain import which

SHIM_DIR = Path(__file__).parent / "shim"

# MSL attribute names rulec may emit: those without an argument, and those taking one integer (an index)
PLAIN_ATTRIBUTES = frozenset({
    "thread_position_in_grid", "threadgroup_position_in_grid", "thread_position_in_threadgroup",
    "threads_per_threadgroup", "threads_per_grid", "threadgroups_per_grid", "thread_index_in_threadgroup",
    "thread_index_in_simdgroup", "thread_index_in_quadgroup", "simdgroup_index_in_threadgroup",
    "quadgroup_index_in_threadgroup", "threads_per_simdgroup", "simdgroups_per_threadgroup",
    "dispatch_threads_per_threadgroup", "thread_execution_width", "grid_origin", "grid_size", "maybe_unused",
})
INDEX_ATTRIBUTES = frozenset({"buffer", "threadgroup", "texture", "sampler", "max_total_threads_per_threadgroup"})

CLANG_FLAGS = ("-target", "spir64", "-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc",
               # no OpenCL extension but half: so `double` is an error, as in MSL
               "-Xclang", "-cl-ext=-all,+cl_khr_fp16", "-fsyntax-only")
# clang's messages in MSL's words
_SPACES = {"__global": "device", "__local": "threadgroup", "__private": "thread", "__constant": "constant",
           "__kernel": "kernel"}

_ATTR = re.compile(r"\[\[(.*?)\]\]", re.S)
_ITEM = re.compile(r"\s*([A-Za-z_]\w*)\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


def _line_of(source: str, pos: int) -> int:
    return source.count("\n", 0, pos) + 1


def attribute_errors(source: str) -> list[str]:
    """One message per attribute that is not MSL's, or is used with a wrong argument."""
    errors = []
    for m in _ATTR.finditer(source):
        line = _line_of(source, m.start())
        for item in m.group(1).split(","):
            im = _ITEM.match(item)
            if im is None:
                errors.append(f"line {line}: malformed attribute [[{item.strip()}]]")
                continue
            attr, arg = im.group(1), im.group(2)
            if attr in INDEX_ATTRIBUTES:
                if arg is None or not re.fullmatch(r"\d+", arg):
                    errors.append(f"line {line}: [[{attr}(n)]] needs an integer index, got [[{item.strip()}]]")
            elif attr in PLAIN_ATTRIBUTES:
                if arg is not None:
                    errors.append(f"line {line}: [[{attr}]] takes no argument, got [[{item.strip()}]]")
            else:
                near = difflib.get_close_matches(attr, sorted(PLAIN_ATTRIBUTES | INDEX_ATTRIBUTES), n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                errors.append(f"line {line}: unknown Metal attribute [[{item.strip()}]]{hint}")
    return errors


def strip_attributes(source: str) -> str:
    """`source` with each `[[...]]` blanked to spaces (newlines kept), so clang's lines and columns still match."""
    return _ATTR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def find_clang() -> str:
    for name in ("clang", *(f"clang-{v}" for v in range(20, 13, -1))):
        path = which(name)
        if path:
            return path
    raise DeviceUnavailable("METAL", "no clang on this machine to check Metal kernels",
                            "kernels still render as Metal Shading Language")


_passed: set[tuple[str, str]] = set()


def check_metal(name: str, source: str) -> None:
    """Raises KernelCompileError unless `source` is a Metal kernel `name` that passes both checks."""
    if (name, source) in _passed:
        return
    errors = attribute_errors(source)
    if not re.search(r"\bkernel\s+[\w:<>]+\s+" + re.escape(name) + r"\s*\(", source):
        errors.append(f"the source defines no kernel named {name!r}")
    if errors:
        raise KernelCompileError(name, "Metal", source, "\n".join(errors), "rulec's Metal attribute check")
    clang = find_clang()
    with tempfile.TemporaryDirectory(prefix="rulec-metal-") as tmp:
        path = Path(tmp, f"{name}.metal")
        path.write_text(strip_attributes(source))
        cmd = [clang, *CLANG_FLAGS, "-isystem", str(SHIM_DIR), str(path)]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if res.returncode != 0:
        log = (res.stderr + res.stdout).replace(str(path), path.name)
        log = re.sub(r"\b(__global|__local|__private|__constant|__kernel)\b", lambda m: _SPACES[m.group(1)], log)
        shown = shlex.join([Path(clang).name, *CLANG_FLAGS, "-isystem", "SHIM", f"{name}.metal"])
        raise KernelCompileError(name, "Metal", source, log, shown)
    _passed.add((name, source))


class MetalProgram:
    """A checked Metal kernel. Metal runs only on macOS, so calling one is a DeviceUnavailable."""

    def __init__(self, name: str, source: str) -> None:
        check_metal(name, source)
        self.name, self.source = name, source

    def __call__(self, buffers: Sequence = (), vals: Sequence[int] = (), **launch: object) -> None:
        if sys.platform != "darwin":
            raise DeviceUnavailable("METAL", "METAL kernels run only on macOS, and this machine runs "
                                    f"{sys.platform}", "they are still rendered and checked")
        raise DeviceUnavailable("METAL", "launching Metal kernels is not built into rulec yet",
                                "they are still rendered and checked")
