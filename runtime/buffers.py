"""BUFFER nodes and the store of their contents.

A buffer is the tensor-level node

    UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=n), UOp(Ops.DEVICE, arg="CPU")), arg=size)

where `n` is a fresh integer: UOps are hash-consed, so the UNIQUE id is what keeps two buffers of the
same dtype and size apart. Its contents are a flat numpy array of `size` elements kept here, keyed by
the BUFFER node itself.

* `new_buffer_uop(dtype, size)` makes a buffer with no contents yet; `ensure_allocated(buf)` gives it
  uninitialized storage, and `get(buf)` does so on first use, so an unwritten buffer reads as garbage.
* `set(buf, data)` copies `data` (any shape, any numpy dtype) in, flattened and converted.
* `adopt(buf, data)` is `set` without the copy where `data` already is flat storage (a loaded pickle's).
* `from_numpy(array, dtype)` is `new_buffer_uop` + `set`.

The store holds its keys weakly: once no graph references a BUFFER node, its contents are dropped.

Storage dtypes: every dtype is stored as the numpy dtype of the same name, except `bfloat16`, which
numpy lacks and which is stored as float32 (the store does not round values to bfloat16: a Tensor made from
host data rounds them first, `round_to_bfloat16`, and kernels round every bfloat16 value they compute), and
`index`, stored as int64.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

_unique_ids = itertools.count()
_store: weakref.WeakKeyDictionary[UOp, np.ndarray] = weakref.WeakKeyDictionary()

_NUMPY_NAMES = {dtypes.bfloat16: "float32", dtypes.index: "int64"}
_FROM_NUMPY = {np.dtype(name): dt for name, dt in (
    ("bool", dtypes.bool), ("int8", dtypes.int8), ("uint8", dtypes.uint8), ("int16", dtypes.int16),
    ("uint16", dtypes.uint16), ("int32", dtypes.int32), ("uint32", dtypes.uint32), ("int64", dtypes.int64),
    ("uint64", dtypes.uint64), ("float16", dtypes.float16), ("float32", dtypes.float32),
    ("float64", dtypes.float64))}


def numpy_dtype(dtype: DType) -> np.dtype:
    """The numpy dtype that stores values of `dtype`."""
    if dtype.kind == "void":
        raise ValueError("a void dtype has no numpy storage")
    return np.dtype(_NUMPY_NAMES.get(dtype, dtype.name))


def from_numpy_dtype(npdt: np.dtype | type) -> DType:
    """The rulec dtype of a numpy dtype; ValueError for dtypes rulec lacks (complex, str, object...)."""
    try:
        return _FROM_NUMPY[np.dtype(npdt)]
    except (KeyError, TypeError):
        raise ValueError(f"numpy dtype {np.dtype(npdt)} has no rulec dtype") from None


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32; NaN stays NaN."""
    x = np.require(x, np.float32, "C")
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def unique_id() -> int:
    """A number no other buffer identity in this process has (BUFFER's UNIQUE, a user's CONTIGUOUS)."""
    return next(_unique_ids)


def new_buffer_uop(dtype: DType, size: int, device: str = "CPU") -> UOp:
    """A fresh BUFFER node of `size` elements, without contents."""
    if size < 0:
        raise ValueError(f"buffer size must be >= 0, got {size}")
    unique = UOp(Ops.UNIQUE, arg=unique_id())
    return UOp(Ops.BUFFER, dtype, (unique, UOp(Ops.DEVICE, arg=device)), size)


def _check(buf: UOp) -> UOp:
    if not isinstance(buf, UOp) or buf.op is not Ops.BUFFER:
        raise ValueError(f"expected a BUFFER node, got {getattr(buf, 'op', type(buf).__name__)}")
    return buf


def is_allocated(buf: UOp) -> bool:
    return _check(buf) in _store


def ensure_allocated(buf: UOp) -> np.ndarray:
    """The storage of `buf`, created uninitialized if it has none yet."""
    _check(buf)
    if buf not in _store:
        _store[buf] = np.empty(buf.arg, dtype=numpy_dtype(buf.dtype))
    return _store[buf]


def get(buf: UOp) -> np.ndarray:
    """The flat contents of `buf` (the stored array itself: writes to it write the buffer)."""
    return ensure_allocated(buf)


def set(buf: UOp, data: np.ndarray) -> None:  # noqa: A001 - the store's get/set pair
    """Copy `data` into `buf`, flattened and converted to the buffer's storage dtype."""
    flat = np.asarray(data).reshape(-1)
    if flat.size != _check(buf).arg:
        raise ValueError(f"buffer holds {buf.arg} elements, got data of shape {np.shape(data)}")
    _store[buf] = flat.astype(numpy_dtype(buf.dtype), copy=True)


def adopt(buf: UOp, data: np.ndarray) -> None:
    """Make `data` the storage of `buf` without a copy where it already is a writable flat array of the
    storage dtype (a large buffer loaded from a pickle is not held twice); else as `set`."""
    flat = np.asarray(data).reshape(-1)
    if flat.dtype == numpy_dtype(_check(buf).dtype) and flat.size == buf.arg and flat.flags.writeable:
        _store[buf] = flat
    else:
        set(buf, flat)


def from_numpy(array: np.ndarray, dtype: DType | None = None, device: str = "CPU") -> UOp:
    """A new BUFFER on `device` holding a copy of `array` (flattened), of `dtype` or the array's own dtype."""
    array = np.asarray(array)
    buf = new_buffer_uop(dtype or from_numpy_dtype(array.dtype), array.size, device)
    set(buf, array)
    return buf
