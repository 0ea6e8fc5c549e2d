"""The parameter list of a rendered kernel, read back from its source.

The runners use it to check a call before it reaches native code: the number of buffers and values, each
buffer's dtype against the pointer's element type, and which buffers a kernel may write (non-const pointers).
A wrong call into a compiled kernel would otherwise read or write memory it does not own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# qualifiers that say nothing about the element type
_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "__global", "global", "__local",
               "local", "__constant", "constant", "__private", "private", "device", "threadgroup", "thread",
               "struct", "signed"}

_ELEMENT = {
    "float": "float32", "double": "float64", "half": "float16", "_Float16": "float16", "__fp16": "float16",
    "__half": "float16", "int": "int32", "int32_t": "int32", "unsigned int": "uint32", "unsigned": "uint32",
    "uint": "uint32", "uint32_t": "uint32", "char": "int8", "int8_t": "int8", "unsigned char": "uint8",
    "uchar": "uint8", "uint8_t": "uint8", "short": "int16", "int16_t": "int16", "unsigned short": "uint16",
    "ushort": "uint16", "uint16_t": "uint16", "long long": "int64", "int64_t": "int64",
    "unsigned long long": "uint64", "ulong": "uint64", "uint64_t": "uint64", "bool": "bool", "_Bool": "bool",
}


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str            # the element type, qualifiers removed ("float", "unsigned int")
    pointer: bool
    const: bool           # a const pointer: the kernel only reads it

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype of the elements, or None for a type this table does not know (no check then)."""
        name = _ELEMENT.get(self.ctype)
        return np.dtype(name) if name else None


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _param(text: str) -> Param:
    text = re.sub(r"\[\[.*?\]\]", " ", text)  # Metal attributes
    pointer = "*" in text or "&" in text
    before_star = text.split("*")[0]
    words = re.findall(r"[A-Za-z_]\w*", text)
    name = words[-1] if words else ""
    const = pointer and "const" in re.findall(r"[A-Za-z_]\w*", before_star)
    ctype = " ".join(w for w in words[:-1] if w not in _QUALIFIERS)
    return Param(name, ctype, pointer and "*" in text, const)


def kernel_params(source: str, name: str) -> list[Param] | None:
    """The parameters of the function `name` defined in `source`, or None when no definition is found."""
    m = re.search(r"\bvoid\s+" + re.escape(name) + r"\s*\(", source)
    if m is None:
        return None
    depth, start = 1, m.end()
    for i in range(start, len(source)):
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        if depth == 0:
            inner = source[start:i].strip()
            if inner in ("", "void"):
                return []
            return [_param(p) for p in _split_top(inner)]
    return None


def check_call(name: str, params: list[Param] | None, buffers: tuple, vals: tuple) -> None:
    """Raises ValueError unless `buffers` and `vals` fit the kernel's parameters and every buffer is a
    C-contiguous numpy array (the kernel indexes flat memory)."""
    for i, b in enumerate(buffers):
        if not isinstance(b, np.ndarray):
            raise ValueError(f"kernel {name!r}: buffer {i} is a {type(b).__name__}, not a numpy array")
        if not b.flags.c_contiguous:
            raise ValueError(f"kernel {name!r}: buffer {i} is not C-contiguous (use np.ascontiguousarray)")
    if params is None:
        return
    ptrs = [p for p in params if p.pointer]
    scalars = [p for p in params if not p.pointer]
    if len(buffers) != len(ptrs) or len(vals) != len(scalars):
        raise ValueError(f"kernel {name!r} takes {len(ptrs)} buffers and {len(scalars)} values "
                         f"({', '.join(p.name for p in params)}), got {len(buffers)} and {len(vals)}")
    for i, (p, b) in enumerate(zip(ptrs, buffers)):
        if p.dtype is not None and b.dtype != p.dtype:
            raise ValueError(f"kernel {name!r}: buffer {i} ({p.name}) must be {p.dtype}, got {b.dtype}")
        if not p.const and not b.flags.writeable:
            raise ValueError(f"kernel {name!r}: buffer {i} ({p.name}) is written but the array is read-only")
    for p, v in zip(scalars, vals):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ValueError(f"kernel {name!r}: value {p.name} must be an int, got {v!r}")
        if not -2**31 <= int(v) < 2**31:
            raise ValueError(f"kernel {name!r}: value {p.name}={v} does not fit a 32-bit int")
