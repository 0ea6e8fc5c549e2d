"""`Tensor`: a tinygrad-compatible frontend that builds the tensor-level graph of docs/tensor-ir.md.

A Tensor is a thin wrapper around one UOp (`self.uop`); every method builds new nodes and nothing is
computed until `realize()` / `numpy()` (runtime/tensor/realize.py), or `lazy_numpy()` (runtime/interpret/lazy_eval.py,
a direct numpy evaluation used by tests). Realization replaces `self.uop` by a view of a BUFFER.

Graph conventions (the contract of docs/tensor-ir.md):
* data (lists, arrays, `rand`, `randn`) becomes a realized BUFFER, with a RESHAPE to the shape on top
  (always, even when it is a no-op, so a realized tensor always looks the same);
* a constant of shape `s` is `CONST.reshape((1,)*len(s)).expand(s)`; a constant the user made
  (`Tensor(3.0)`, `full`, `zeros`, `ones`) has a DEVICE source, a Python scalar inside an op has none;
* `arange` is lazy: IOTA (0, 1, ..., n-1) cast, scaled and shifted;
* broadcasting is explicit: RESHAPE (leading 1s) then EXPAND; other no-op movement ops are not built;
* reductions are REDUCE_AXIS (reduced axes kept as 1) followed by a RESHAPE that drops them unless
  `keepdim`; axes of size 1 are not reduced at all (they need no work);
* transcendental functions are built from EXP2 / LOG2 / SIN / SQRT / RECIP.

Arguments (shapes, axes, pads, shrinks, constants) are checked by runtime/tensor/tensor_args.py: numpy's rules,
errors that name the argument, integer constants that wrap into their dtype (docs/tensor-ir.md).

Dtype promotion: a binary op between tensors of different kinds (bool < int < float) takes the dtype
of the higher kind (tinygrad's lattice: int32 + float32 -> float32, not numpy's float64); within a kind
it follows numpy (int8 + uint8 -> int16, float16 + float32 -> float32; bfloat16, which numpy lacks,
wins over ints and loses to float32/float64, and bfloat16 + float16 -> float32). Python scalars are weak
(tinygrad): they take the tensor's dtype unless they are of a higher kind, in which case they bring the
default dtype of their kind (float32 for floats, int32 for ints).

Weak tensors (tinygrad 0.14's weakint / weakfloat): a tensor that stands for a Python scalar is weak too,
so that it promotes as one (`Tensor(3) + int8` is int8, `Tensor(2).exp() + float16` is float16). Weak
are `Tensor(3)` and `Tensor(0.5)` (a Python int or float, no dtype asked for), what movement ops, unary
ops, `contiguous()` and `realize()` make of a weak tensor, and an elementwise result whose dtype came
from a weak operand: every operand weak, or a weak one of a higher kind than every tensor that is not
(`int8 * 0.5` is a weak float). Its dtype is its kind's default (int32, float32: what it is stored
as); `cast`, reductions, `clone` and an `assign` into it make a tensor that is not weak.

Tensors without a device (tinygrad 0.14's "virtual" tensors): a graph that reads no buffer and no
user-made constant (an `arange` and what is computed from it with Python scalars) has nowhere to be
stored. `realize()` and `schedule()` leave it lazy, as a function of its indices that every consumer
recomputes inside its own kernel; `numpy()` computes it with one kernel. `device` is None for it.
"""
from __future__ import annotations

import functools
import importlib
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from rulec.runtime import buffers
from rulec.runtime.tensor import tensor_args
from rulec.runtime.tensor.tensor_args import to_dtype
from rulec.runtime.device import Device
from rulec.runtime.tensor.autograd import Autograd
from rulec.runtime.tensor.live import all_tensors, graph_devices, is_virtual, made_from
from rulec.runtime.tensor.linalg import LinalgOps
from rulec.runtime.tensor.tensor_more import MoreOps, last_writer_chain
from rulec.runtime.ir.dtype import DType, Invalid, InvalidType, dtypes
from rulec.runtime.engine.helpers import identity_element
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.placement import MULTI_MASK, layout, part_arg
from rulec.runtime.ir.shape import prod, shrink_span, size_sum
from rulec.runtime.ir.uop import UOp

__all__ = ["Tensor", "dtypes", "least_upper_dtype"]

Scalar = bool | int | float
_LOG2_E = 1 / math.log(2)
_LN_2 = math.log(2)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)

# ---------------------------------------------------------------------------------------- dtypes


def _kind(dt: DType) -> int:
    """0 bool, 1 integer, 2 float: the order in which kinds win in a promotion."""
    return 0 if dt.kind == "bool" else 2 if dt.is_float else 1


def least_upper_dtype(*dts: DType) -> DType:
    """The dtype a binary op between tensors of these dtypes computes in (see the module docstring)."""
    top = max(_kind(d) for d in dts)
    cands = [d for d in dts if _kind(d) == top]
    if dtypes.bfloat16 in cands:
        floats = [d for d in cands if d != dtypes.bfloat16]
        if dtypes.float16 in floats:
            floats.append(dtypes.float32)  # neither half type holds the other
        return max(floats, key=lambda d: d.itemsize, default=dtypes.bfloat16)
    return buffers.from_numpy_dtype(np.result_type(*(buffers.numpy_dtype(d) for d in cands)))


def _scalar_dtype(v: Scalar) -> DType:
    return dtypes.bool if isinstance(v, bool) else dtypes.default_int if isinstance(v, int) else dtypes.default_float


def _is_weak(x: Tensor | Scalar) -> bool:
    """A Python scalar, or a tensor that stands for one (see the module docstring)."""
    return not isinstance(x, Tensor) or getattr(x, "_weak", False)


def _weak_dtype(x: Tensor | Scalar) -> DType:
    return x.dtype if isinstance(x, Tensor) else _scalar_dtype(x)


def _scalar_tensor_dtype(v: Scalar) -> DType:
    """The dtype of `Tensor(v)`: the scalar's default, or int64 (uint64) for an int past int32 (int64), as
    for Python data (`_numpy_to_dtype`): Tensor(2**40) is not wrapped to 0."""
    if type(v) is int and not dtypes.int32.min <= v <= dtypes.int32.max:
        return dtypes.int64 if v <= dtypes.int64.max else dtypes.uint64
    return _scalar_dtype(v)


def _promote(items: Sequence[Tensor | Scalar]) -> DType:
    """The common dtype of tensors and weak operands (Python scalars and weak tensors): the weak ones
    decide only where they are of a higher kind than every other."""
    strong_dts = [x.dtype for x in items if not _is_weak(x)]
    weak_dts = [_weak_dtype(x) for x in items if _is_weak(x)]
    strong = least_upper_dtype(*strong_dts) if strong_dts else None
    weak = least_upper_dtype(*weak_dts) if weak_dts else None
    if strong is None or (weak is not None and _kind(weak) > _kind(strong)):
        assert weak is not None
        return weak
    return strong


def _commit_weak(t: Tensor, dtype: DType) -> Tensor:
    """Weak `t` in `dtype`. One that is still its Python scalar (a CONST, reshaped and expanded) becomes a
    constant of `dtype` made from the scalar's own value: float64 + Tensor(1.0 + 2**-40) must not round
    it through float32 first (nor an int through int32)."""
    def rebuilt(u: UOp) -> UOp | None:
        if u.op is Ops.CONST:
            return _const(dtype, u.arg, u.src)
        if u.op in (Ops.RESHAPE, Ops.EXPAND) and (inner := rebuilt(u.src[0])) is not None:
            return u.replace(dtype=dtype, src=(inner,))
        return None
    u = rebuilt(t.uop) if t.dtype != dtype else None
    return t.cast(dtype) if u is None else Tensor(u)


def _promotes_weak(items: Sequence[Tensor | Scalar]) -> bool:
    """Whether an elementwise result of these operands is weak: its dtype came from a weak operand (all of
    them weak, or a weak one of a higher kind than every tensor that is not)."""
    strong = [_kind(x.dtype) for x in items if not _is_weak(x)]
    weak = [_kind(_weak_dtype(x)) for x in items if _is_weak(x)]
    return not strong or (bool(weak) and max(weak) > max(strong))


def _weakened(t: Tensor, weak: bool) -> Tensor:
    """`t`, marked weak or not (it is a tensor this module just built)."""
    t._weak = weak
    return t


def _sum_dtype(dt: DType) -> DType:
    """Sums accumulate small integers in 32 bits (as tinygrad); floats and 64-bit ints keep their dtype."""
    if dt.kind == "bool" or (dt.kind == "int" and dt.itemsize < 4):
        return dtypes.int32
    if dt.kind == "uint" and dt.itemsize < 4:
        return dtypes.uint32
    return dt


def _float_acc_dtype(dt: DType) -> DType:
    """The dtype a float sum accumulates in: float32 for the half-precision dtypes."""
    return dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt


def _float_dtype(dt: DType) -> DType:
    return dt if dt.is_float else dtypes.default_float


def _numpy_to_dtype(arr: np.ndarray, from_python: bool) -> DType:
    """The dtype of data: numpy arrays keep theirs, Python data gets tinygrad's defaults."""
    if not from_python:
        return buffers.from_numpy_dtype(arr.dtype)
    if arr.dtype.kind == "b":
        return dtypes.bool
    if arr.dtype.kind in "iu":
        fits = arr.size == 0 or (arr.min() >= dtypes.int32.min and arr.max() <= dtypes.int32.max)
        # numpy makes ints in [2**63, 2**64) uint64: int64 would turn them negative
        return dtypes.default_int if fits else dtypes.uint64 if arr.max() > dtypes.int64.max else dtypes.int64
    if arr.dtype.kind == "f":
        return dtypes.default_float
    raise TypeError(f"cannot make a Tensor from Python data of numpy dtype {arr.dtype}")


# ---------------------------------------------------------------------------------------- shapes


def _shape_args(shape: Any, rest: tuple, what: str = "shape") -> tuple:
    """`f((2, 3))` and `f(2, 3)` both mean (2, 3), as in tinygrad; entries are type-checked integers,
    bound variables or None (reshape keeps that axis). Ranges are checked by the caller."""
    return tensor_args.int_tuple(shape, rest, what, allow_none=True)


def _varshape(shape: tuple) -> tuple:
    """The shape of a new tensor `f(*shape)` where f takes `f(2, 3)` or `f((2, 3))`: sizes >= 0."""
    return tensor_args.new_shape(shape)


# significand bits (with the implicit one) of the floats narrower than the float32 that `rand` draws
_NARROW_FLOAT_BITS = {"float16": 11, "bfloat16": 8}


def _on_grid_below_one(u: np.ndarray, dtype: DType) -> np.ndarray:
    """Uniform float32 draws in [0, 1) rounded down onto a grid that `dtype` holds exactly: a plain cast
    to float16 or bfloat16 rounds the draws nearest 1 up to 1.0, outside rand's half-open range."""
    bits = _NARROW_FLOAT_BITS.get(dtype.name)
    if bits is None:
        return u
    steps = np.float32(1 << bits)
    return np.floor(u * steps) / steps


def _host_shape(shape: tuple, what: str) -> tuple:
    """A shape the host can draw random values for: every size known (dropout over a symbolic axis)."""
    if any(isinstance(s, UOp) for s in shape):
        raise ValueError(f"{what} of shape {shape}: random values are drawn on the host for every element, so "
                         "a symbolic size is not taken (dropout over a symbolic axis, say)")
    return shape


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of shapes; ValueError naming them when they do not broadcast."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError("cannot broadcast " + " with ".join(str(tuple(s)) for s in shapes))
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _norm_axis(axis: int, ndim: int, shape: tuple) -> int:
    return tensor_args.axis(axis, ndim, shape)


def _flat(pairs: Iterable[Iterable[int]]) -> tuple[int, ...]:
    return tuple(x for p in pairs for x in p)


def _realize_module() -> Any:
    # imported late: realize.py imports this module; import_module also lets tests substitute it
    return importlib.import_module("rulec.runtime.tensor.realize")


def _multi_module() -> Any:
    # imported late: multi.py subclasses Tensor
    return importlib.import_module("rulec.runtime.tensor.multi")


# ---------------------------------------------------------------------------------------- Tensor


class Tensor(MoreOps, LinalgOps, Autograd):
    """A lazy tensor: `self.uop` is the tensor-level graph that computes it."""

    # _made_from: the tensor a view was made from, so that an assign to a view of a computed value
    # reaches the tensors it views (see `assign`); _realized_from: the graph a realized tensor was computed
    # from, for its gradients (runtime/tensor/realize.py)
    # _weak: the tensor stands for a Python scalar in promotions (see the module docstring)
    __slots__ = ("uop", "_made_from", "_realized_from", "_weak", "__weakref__")
    __array_ufunc__ = None  # `ndarray + Tensor` must defer to Tensor.__radd__, not loop in numpy
    _seed: int = 0
    _rng_counter: int = 0

    def __init__(self, data: Any, device: str | tuple[str, ...] | None = None, dtype: DType | str | None = None,
                 requires_grad: bool | None = None):
        self._init_autograd(requires_grad)  # .grad and requires_grad (runtime/tensor/autograd.py)
        # a Python int or float with no dtype asked for is weak (tinygrad 0.14's weakint / weakfloat)
        self._weak = dtype is None and isinstance(data, (int, float)) and not isinstance(data, bool)
        if isinstance(device, (tuple, list)):  # on several devices: made on one, then replicated (tinygrad's)
            self.uop = Tensor(data, dtype=dtype).to(device).uop
            all_tensors.add(self)
            return
        dev = _device(device)
        dtype = to_dtype(dtype)
        if isinstance(data, Tensor):
            uop = data.uop if device is None else data.to(dev).uop
        elif isinstance(data, UOp):
            uop = _committed_index(data) if dtype is None else data
            if uop._mask & MULTI_MASK:
                layout(uop)  # an op with no per-device form on a multi-device value fails here, as it is built
        elif isinstance(data, np.generic):  # before float: np.float64 subclasses float
            uop = _const(dtype or buffers.from_numpy_dtype(data.dtype), data.item(), _on(device))
        elif isinstance(data, (bool, int, float)):
            # a Python scalar with no device asked for has none (tinygrad 0.14): it joins its operands'
            # device, and on its own is realized on the default one only when read
            uop = _const(dtype or _scalar_tensor_dtype(data), data, _on(device))
        elif isinstance(data, np.ndarray):
            uop = _buffer_view(data, dtype or buffers.from_numpy_dtype(data.dtype), dev)
        elif isinstance(data, (list, tuple)):
            arr = tensor_args.python_data(np.array(data), dtype)
            uop = _buffer_view(arr, dtype or _numpy_to_dtype(arr, from_python=True), dev)
        elif data is None:  # no data: a 0-d zero of the default float (tinygrad 0.14's)
            uop = _const(dtype or dtypes.default_float, 0, _on(device))
        elif isinstance(data, Path):  # a file's bytes, read as `dtype` (uint8 by default), as tinygrad's
            uop = _file_contents(data, dtype or dtypes.uint8, dev)
        elif isinstance(data, (bytes, bytearray)):  # raw bytes: one uint8 each
            uop = _buffer_view(np.frombuffer(bytes(data), np.uint8).copy(), dtypes.uint8, dev)
        else:
            raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
        if dtype is not None and uop.dtype != dtype:
            uop = UOp(Ops.CAST, dtype, (uop,))
        self.uop: UOp = uop
        all_tensors.add(self)

    def __reduce__(self) -> tuple[Any, tuple]:
        # the buffers' contents travel with the graph, and load as fresh buffers (runtime/tensor/pickling.py)
        from rulec.runtime.tensor import pickling

        return pickling.restore_tensor, (type(self), *pickling.tensor_state(self))

    # ------------------------------------------------------------------ facts

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.uop.shape)

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> str | tuple[str, ...] | None:
        """The device the tensor lives on ("CPU", "CL", ...), the tuple of devices of a multi-device tensor,
        or None for one with no storage (see the module docstring)."""
        if self.uop._mask & MULTI_MASK and (lay := layout(self.uop)) is not None:
            return lay.devices
        devs = graph_devices(self.uop)  # cached per node: an op costs O(1) here, not a walk of its graph
        if not devs:
            return None
        return next(iter(devs)) if len(devs) == 1 else Device.DEFAULT

    def to(self, device: str | tuple[str, ...] | None) -> Tensor:
        """This tensor on `device`: itself if it is there already (or has no device), else a COPY. A tuple
        of devices replicates it on each (`shard(device)`)."""
        if isinstance(device, (tuple, list)):
            return _multi_module().to_devices(self, device)
        dev = _device(device)
        if self.device is None or self.device == dev:
            return self
        return Tensor(UOp(Ops.COPY, self.dtype, (self.uop, UOp(Ops.DEVICE, arg=dev))))

    def shard(self, devices: Sequence[str], axis: int | None = None) -> Tensor:
        """This tensor on several devices (runtime/tensor/multi.py): split along `axis` in equal parts, one
        per device, or replicated on each (axis None). Its `device` is then the tuple of devices."""
        return _multi_module().shard(self, devices, axis)

    def shard_(self, devices: Sequence[str], axis: int | None = None) -> Tensor:
        """`shard`, in place: this tensor becomes the multi-device one."""
        self.uop = self.shard(devices, axis).uop
        return self

    def shard_like(self, y: Tensor) -> Tensor:
        """This tensor laid out as `y`: on y's device, or sharded over y's devices on y's axis (itself when
        it is already; a multi-device tensor laid out otherwise is resharded, where tinygrad refuses)."""
        if not isinstance(y.device, tuple):
            return self.to(y.device)
        if isinstance(self.device, tuple) and (self.device, self.axis) == (y.device, y.axis):
            return self
        return self.shard(y.device, y.axis)

    @property
    def axis(self) -> int | None:
        """The axis a multi-device tensor is split along (None: replicated, or on one device)."""
        lay = layout(self.uop)
        return None if lay is None else lay.axis

    @property
    def shards(self) -> list[Tensor]:
        """Each device's part, in device order (a tensor on one device: itself)."""
        return _multi_module().shards(self)

    def to_(self, device: str | None) -> Tensor:
        """Move this tensor to `device` in place (its graph becomes the copy)."""
        self.uop = self.to(device).uop
        return self

    def numel(self) -> int:
        return int(prod(self.shape))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<Tensor shape={self.shape} dtype={self.dtype.name} op={self.uop.op.name}>"

    def __hash__(self) -> int:
        return id(self)  # `==` builds a comparison, so hashing is by identity (as tinygrad)

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a Tensor is ambiguous; realize it with .numpy() or .item()")

    # ------------------------------------------------------------------ creation

    @staticmethod
    def from_url(url: str, gunzip: bool = False, **kwargs: Any) -> Tensor:
        """The contents of `url` as a uint8 Tensor (or `dtype=`), downloaded once and kept in the user cache
        (runtime/tensor/downloads.py); `gunzip` unzips them first."""
        from rulec.runtime.tensor.downloads import fetch

        return Tensor(fetch(url, gunzip=gunzip), **kwargs)

    @staticmethod
    def empty(*shape: Any, device: str | None = None, dtype: DType | str | None = None) -> Tensor:
        """An uninitialized buffer of this shape (float32 by default)."""
        dev = _device(device)
        shape, dtype = _varshape(shape), to_dtype(dtype)
        if any(isinstance(s, UOp) for s in shape):
            # a symbolic size: a buffer for its largest binding, of which the first `size` are the tensor
            largest = tuple(s.vmax if isinstance(s, UOp) else s for s in shape)
            return Tensor.empty(largest, device=device, dtype=dtype).shrink(tuple((0, s) for s in shape))
        return Tensor(_reshape_buffer(buffers.new_buffer_uop(dtype or dtypes.default_float, int(prod(shape)), dev), shape))

    @staticmethod
    def full(shape: Any, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None,
             buffer: bool = True) -> Tensor:
        """A constant: `CONST.reshape((1,)*n).expand(shape)`; the dtype follows the value by default.
        `buffer` is taken for tinygrad's signature: a constant here is always tinygrad's `buffer=False`
        kind (no storage until an op or a realize needs one), which holds the same values. A fill of
        `Invalid` leaves the values unspecified: an `empty` buffer (bool by default, as tinygrad's)."""
        shape, dtype = _varshape((shape,)), to_dtype(dtype)
        if isinstance(fill_value, InvalidType):
            return Tensor.empty(shape, device=device, dtype=dtype or dtypes.bool)
        if isinstance(device, (tuple, list)):  # replicated: the constant placed on each device
            return _multi_module().full(shape, fill_value, dtype or _scalar_dtype(fill_value), device)
        return Tensor(fill_value, _device(device), dtype=dtype or _scalar_dtype(fill_value))._broadcast_to(shape)

    @staticmethod
    def invalids(*shape: Any, device: str | None = None, dtype: DType | str | None = None) -> Tensor:
        """A tensor whose values are left unspecified (tinygrad's `full(shape, Invalid)`): an `empty` buffer."""
        return Tensor.full(_varshape(shape), Invalid, dtype=dtype, device=device)

    @staticmethod
    def zeros(*shape: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True) -> Tensor:
        return Tensor.full(_varshape(shape), 0, to_dtype(dtype) or dtypes.default_float, device, buffer)

    @staticmethod
    def ones(*shape: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True) -> Tensor:
        return Tensor.full(_varshape(shape), 1, to_dtype(dtype) or dtypes.default_float, device, buffer)

    def zeros_like(self, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True) -> Tensor:
        return self.full_like(0, dtype, device, buffer)

    def ones_like(self, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True) -> Tensor:
        return self.full_like(1, dtype, device, buffer)

    def full_like(self, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None,
                  buffer: bool = True) -> Tensor:
        """A constant of self's shape, on self's device (laid out as self on several devices) or `device`."""
        dtype = to_dtype(dtype) or self.dtype
        if device is not None:
            return Tensor.full(self.shape, fill_value, dtype=dtype, device=device, buffer=buffer)
        if isinstance(self.device, tuple):
            return _multi_module().full(self.shape, fill_value, dtype, self.device, self.axis)
        return Tensor.full(self.shape, fill_value, dtype=dtype, device=self.device)

    @staticmethod
    def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DType | str | None = None,
               device: str | None = None) -> Tensor:
        """`start, start+step, ...` below `stop`, lazily: element i is `start + i*step`, computed in
        `dtype` inside the kernels that use it. It has no device (see the module docstring)."""
        _device(device)  # checked: an arange takes the device of the tensors it meets
        dtype = to_dtype(dtype)
        if stop is None:
            start, stop = 0, start
        if any(isinstance(v, UOp) for v in (start, stop, step)):
            return Tensor._symbolic_arange(start, stop, step, dtype)
        n = tensor_args.arange_length(start, stop, step)
        if dtype is None:
            dtype = dtypes.default_float if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.default_int
        tensor_args.check_arange_fits(start, step, n, dtype)
        index_dtype = tensor_args.arange_index_dtype(n, dtype)
        # a narrow integer dtype too small for the indices computes in the index dtype, then casts
        compute = index_dtype if dtype.kind in ("int", "uint") else dtype
        x = Tensor(UOp(Ops.IOTA, index_dtype, (), n)).cast(compute)
        x = x if step == 1 else x * _weak(step, compute)
        x = x if start == 0 else x + _weak(start, compute)
        return x.cast(dtype)

    @staticmethod
    def _symbolic_arange(start: Any, stop: Any, step: Any, dtype: DType | None) -> Tensor:
        """`arange(start_pos, start_pos + n)`: a bound variable (or a sum of them) as start or stop, step 1.
        Its length `stop - start` is a symbolic size: the first that many of an arange as long as the
        largest binding allows, plus start."""
        if not (type(step) is int and step == 1) or isinstance(start, float) or isinstance(stop, float):
            raise TypeError(f"arange({start}, {stop}, {step}): a symbolic arange takes integer bounds and "
                            "step 1 in rulec (the length of another step is not a sum of variables)")
        length = tensor_args.int_tuple((size_sum(stop, (start, -1)),), what="arange length")[0]
        if isinstance(length, int):
            longest = length
        elif length.vmin < 0:
            raise ValueError(f"arange({start}, {stop}): its length {length} can be negative (down to {length.vmin})")
        else:
            longest = length.vmax
        dtype = dtype or dtypes.default_int
        if dtype.kind not in ("int", "uint"):
            raise TypeError(f"arange({start}, {stop}): a symbolic arange is an integer one, not {dtype.name}")
        x = Tensor.arange(longest, dtype=dtype)[:length]
        return x if isinstance(start, int) and start == 0 else x + Tensor(start).cast(dtype)

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Seed `rand`/`randn`: after `manual_seed(n)`, the k-th call draws from numpy's generator (n, k)."""
        Tensor._seed, Tensor._rng_counter = int(seed), 0

    @staticmethod
    def _rng(seed: int | None) -> np.random.Generator:
        if seed is not None:
            return np.random.default_rng(seed)
        Tensor._rng_counter += 1
        return np.random.default_rng((Tensor._seed, Tensor._rng_counter))

    @staticmethod
    def rand(*shape: Any, seed: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1). Generated by numpy on the host into a realized buffer (tinygrad computes it
        on the device with threefry, so the values differ from tinygrad's)."""
        dev = _device(device)
        shape = _host_shape(_varshape(shape), "rand")
        dtype = to_dtype(dtype) or dtypes.default_float
        values = _on_grid_below_one(np.asarray(Tensor._rng(seed).random(shape, dtype=np.float32)), dtype)
        return Tensor(values.astype(buffers.numpy_dtype(dtype)), dev, dtype=dtype)

    @staticmethod
    def randn(*shape: Any, seed: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Standard normal; host-generated like `rand`."""
        dev = _device(device)
        shape = _host_shape(_varshape(shape), "randn")
        dtype = to_dtype(dtype) or dtypes.default_float
        values = np.asarray(Tensor._rng(seed).standard_normal(shape, dtype=np.float32))
        return Tensor(values.astype(buffers.numpy_dtype(dtype)), dev, dtype=dtype)

    # ------------------------------------------------------------------ graph building helpers

    def _mop(self, op: Ops, arg: Any) -> Tensor:
        return made_from(_weakened(Tensor(UOp(op, self.dtype, (self.uop,), arg)), _is_weak(self)), self)

    def _unary(self, op: Ops) -> Tensor:
        return _weakened(Tensor(UOp(op, self.dtype, (self.uop,))), _is_weak(self))

    def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
        """Explicit broadcast: RESHAPE to add leading 1s, then EXPAND."""
        if self.shape == shape:
            return self
        _broadcast_shape(self.shape, shape)  # raises with both shapes named
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if self.ndim < len(shape) else self
        return x.expand(shape)

    @staticmethod
    def _operands(*items: Any, dtype: DType | None = None) -> list[Tensor]:
        """Tensors and scalars promoted to one dtype (or `dtype`) and broadcast to one shape."""
        items = tuple(_operand(x) for x in items)
        _same_device(items)
        dt = dtype or _promote(items)
        tensors = [(_commit_weak(x, dt) if _is_weak(x) else x.cast(dt)) if isinstance(x, Tensor) else _weak(x, dt)
                   for x in items]
        shape = _broadcast_shape(*(t.shape for t in tensors))
        return [t._broadcast_to(shape) for t in tensors]

    def _binary(self, op: Ops, other: Any, reverse: bool = False, float_only: bool = False) -> Tensor:
        items = (_operand(other), self) if reverse else (self, _operand(other))
        a, b = Tensor._operands(*items)
        if float_only and not a.dtype.is_float:
            a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
        return _weakened(Tensor(UOp(op, a.dtype, (a.uop, b.uop))), _promotes_weak(items))

    def _bits(self, op: Ops, name: str, other: Any, reverse: bool = False) -> Tensor:
        """&, |, ^ on bool or integer operands; a float one is an error (C has no float `&`)."""
        items = (_operand(other), self) if reverse else (self, _operand(other))
        a, b = Tensor._operands(*items)
        if a.dtype.is_float:
            raise tensor_args.DTypeArgError(f"{name} needs bool or integer tensors, got {a.dtype.name} of shape {a.shape} "
                                            f"and {b.dtype.name} of shape {b.shape}")
        return _weakened(Tensor(UOp(op, a.dtype, (a.uop, b.uop))), _promotes_weak(items))

    def _beyond(self, other: Any) -> int:
        """1 (-1) when `other` is a Python int above (below) the range of self's integer dtype, where it
        would wrap (int8: 300 is 44); else 0."""
        if type(other) is not int or self.dtype.kind not in ("int", "uint"):
            return 0
        return 1 if other > self.dtype.max else -1 if other < self.dtype.min else 0

    def _compare(self, op: Ops, other: Any, reverse: bool = False) -> Tensor:
        if beyond := self._beyond(other):
            # every element compares to it the same way, as in numpy (and tinygrad): x == x is all True,
            # x != x all False
            always = op is Ops.CMPNE or (op is Ops.CMPLT and (beyond > 0) != reverse)
            return self._compare(Ops.CMPEQ if always else Ops.CMPNE, self)
        items = (_operand(other), self) if reverse else (self, _operand(other))
        # a weak int tensor compares at its own width, not wrapped into an int partner's dtype: Tensor(300) >
        # uint8 is True, as numpy (and tinygrad) compare a Python int (a Python scalar: `_beyond` above)
        committed = tuple(Tensor(x.uop) if isinstance(x, Tensor) and _is_weak(x) and not x.dtype.is_float else x
                          for x in items)
        a, b = Tensor._operands(*items, dtype=_promote(committed))
        return Tensor(UOp(op, dtypes.bool, (a.uop, b.uop)))

    def _inverse(self) -> Tensor:
        """An order-reversing map without overflow: -x for floats, ~x for ints, not x for bools."""
        if self.dtype.is_float:
            return -self
        if self.dtype == dtypes.bool:
            return self.logical_not()
        ones = -1 if self.dtype.kind == "int" else self.dtype.max
        return self._binary(Ops.XOR, _weak(ones, self.dtype))

    def _to_float(self) -> Tensor:
        # a function of floats keeps a weak int weak (tinygrad: Tensor(2).exp() is its weak float)
        return self if self.dtype.is_float else _weakened(self.cast(dtypes.default_float), _is_weak(self))

    # ------------------------------------------------------------------ elementwise: arithmetic

    def add(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.ADD, x, reverse)

    def sub(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.SUB, x, reverse)

    def mul(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.MUL, x, reverse)

    def div(self, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """True division; integer operands divide in float32 (as tinygrad). `rounding_mode` "trunc" rounds
        the quotient toward zero, "floor" down; on two integer operands that is integer division."""
        if rounding_mode is not None:
            return self._rounded_div(x, reverse, rounding_mode)
        if not _promote((self, _operand(x))).is_float:
            # a scalar goes to float32 as it is: through the int dtype, uint8 / -1 would divide by 255
            items = (_operand(x), self) if reverse else (self, _operand(x))
            a, b = Tensor._operands(*items, dtype=dtypes.default_float)
            return _weakened(Tensor(UOp(Ops.FDIV, a.dtype, (a.uop, b.uop))), _promotes_weak(items))
        return self._binary(Ops.FDIV, x, reverse, float_only=True)

    def _rounded_div(self, x: Any, reverse: bool, rounding_mode: str) -> Tensor:
        if rounding_mode not in ("trunc", "floor"):
            raise tensor_args.BadArgError(f"div rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}")
        if _promote((self, _operand(x))).kind in ("int", "uint"):
            return self.idiv(x, reverse) if rounding_mode == "trunc" else self._floor_div(x, reverse)
        q = self.div(x, reverse)
        return q.trunc() if rounding_mode == "trunc" else q.floor()

    def pow(self, x: Any, reverse: bool = False) -> Tensor:
        x = _operand(x)
        if _promote((self, x)).kind in ("int", "uint"):
            return _int_pow(self, x, reverse)
        return self._binary(Ops.POW, x, reverse)

    def maximum(self, x: Any) -> Tensor:
        if self._beyond(x) < 0:  # below the dtype's range (it would wrap): self is the maximum (a new tensor)
            return self._binary(Ops.MAX, self)
        return self._binary(Ops.MAX, x)

    def minimum(self, x: Any) -> Tensor:
        if self._beyond(x) > 0:
            return self._binary(Ops.MAX, self)
        a, b = Tensor._operands(self, x)
        return a._inverse().maximum(b._inverse())._inverse()

    def where(self, x: Any, y: Any) -> Tensor:
        """`x` where self is true, else `y` (self is the condition, as in tinygrad). One of them may be
        `Invalid`, a value left unspecified: then the other one is the value everywhere (any value is
        right where the condition leaves it unspecified, and this one needs no select)."""
        cond = self.cast(dtypes.bool)
        if isinstance(x, InvalidType) or isinstance(y, InvalidType):
            if isinstance(x, InvalidType) and isinstance(y, InvalidType):
                raise TypeError(f"where: both values are Invalid for a condition {self.shape}; one must be a value")
            v = Tensor._operands(y if isinstance(x, InvalidType) else x)[0]
            return v._broadcast_to(_broadcast_shape(cond.shape, v.shape))
        x, y = _operand(x), _operand(y)
        x_, y_ = Tensor._operands(x, y)
        shape = _broadcast_shape(cond.shape, x_.shape)
        c, a, b = cond._broadcast_to(shape), x_._broadcast_to(shape), y_._broadcast_to(shape)
        return _weakened(Tensor(UOp(Ops.WHERE, a.dtype, (c.uop, a.uop, b.uop))), _promotes_weak((x, y)))

    def __add__(self, x: Any) -> Tensor: return self.add(x)
    def __radd__(self, x: Any) -> Tensor: return self.add(x, reverse=True)
    def __sub__(self, x: Any) -> Tensor: return self.sub(x)
    def __rsub__(self, x: Any) -> Tensor: return self.sub(x, reverse=True)
    def __mul__(self, x: Any) -> Tensor: return self.mul(x)
    def __rmul__(self, x: Any) -> Tensor: return self.mul(x, reverse=True)
    def __truediv__(self, x: Any) -> Tensor: return self.div(x)
    def __rtruediv__(self, x: Any) -> Tensor: return self.div(x, reverse=True)
    def __pow__(self, x: Any) -> Tensor: return self.pow(x)
    def __rpow__(self, x: Any) -> Tensor: return self.pow(x, reverse=True)
    def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
    def __rmatmul__(self, x: Any) -> Tensor: return Tensor(x).matmul(self)
    def __neg__(self) -> Tensor: return self.neg()
    def __abs__(self) -> Tensor: return self.abs()
    def __invert__(self) -> Tensor: return self._invert()
    def __and__(self, x: Any) -> Tensor: return self._bits(Ops.AND, "&", x)
    def __or__(self, x: Any) -> Tensor: return self._bits(Ops.OR, "|", x)
    def __xor__(self, x: Any) -> Tensor: return self._bits(Ops.XOR, "^", x)
    def __floordiv__(self, x: Any) -> Tensor: return self._floor_div(x)
    def __rfloordiv__(self, x: Any) -> Tensor: return self._floor_div(x, reverse=True)
    def __mod__(self, x: Any) -> Tensor: return self._floor_mod(x)
    def __rmod__(self, x: Any) -> Tensor: return self._floor_mod(x, reverse=True)
    def __rand__(self, x: Any) -> Tensor: return self._bits(Ops.AND, "&", x, reverse=True)
    def __ror__(self, x: Any) -> Tensor: return self._bits(Ops.OR, "|", x, reverse=True)
    def __rxor__(self, x: Any) -> Tensor: return self._bits(Ops.XOR, "^", x, reverse=True)

    # in place, as tinygrad: the result is assigned to self's buffer (`assign` checks shape and dtype)
    def __iadd__(self, x: Any) -> Tensor: return self.assign(self.add(x))
    def __isub__(self, x: Any) -> Tensor: return self.assign(self.sub(x))
    def __imul__(self, x: Any) -> Tensor: return self.assign(self.mul(x))
    def __itruediv__(self, x: Any) -> Tensor: return self.assign(self.div(x))
    def __ifloordiv__(self, x: Any) -> Tensor: return self.assign(self._floor_div(x))
    def __imod__(self, x: Any) -> Tensor: return self.assign(self._floor_mod(x))
    def __ipow__(self, x: Any) -> Tensor: return self.assign(self.pow(x))
    def __iand__(self, x: Any) -> Tensor: return self.assign(self & x)
    def __ior__(self, x: Any) -> Tensor: return self.assign(self | x)
    def __ixor__(self, x: Any) -> Tensor: return self.assign(self ^ x)

    # ------------------------------------------------------------------ elementwise: comparisons

    def __lt__(self, x: Any) -> Tensor: return self._compare(Ops.CMPLT, x)
    def __gt__(self, x: Any) -> Tensor: return self._compare(Ops.CMPLT, x, reverse=True)
    def __le__(self, x: Any) -> Tensor: return self._compare(Ops.CMPLT, x) | self._compare(Ops.CMPEQ, x)
    def __ge__(self, x: Any) -> Tensor: return self.__gt__(x) | self._compare(Ops.CMPEQ, x)
    def __eq__(self, x: Any) -> Tensor: return self._compare(Ops.CMPEQ, x)  # type: ignore[override]
    def __ne__(self, x: Any) -> Tensor: return self._compare(Ops.CMPNE, x)  # type: ignore[override]

    def eq(self, x: Any) -> Tensor:
        return self == x

    def ne(self, x: Any) -> Tensor:
        return self != x

    def _invert(self) -> Tensor:
        if self.dtype.is_float:
            raise tensor_args.DTypeArgError(f"~ needs a bool or integer tensor, not {self.dtype.name}")
        return self._inverse()  # logical not for bools, bitwise not for ints

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool)._compare(Ops.CMPNE, True)

    # ------------------------------------------------------------------ elementwise: unary

    def neg(self) -> Tensor:
        return self.logical_not() if self.dtype == dtypes.bool else self._unary(Ops.NEG)

    def abs(self) -> Tensor:
        if self.dtype.kind in ("bool", "uint"):
            return self
        return self.maximum(-self)

    def reciprocal(self) -> Tensor:
        return self._to_float()._unary(Ops.RECIP)

    def sqrt(self) -> Tensor:
        return self._to_float()._unary(Ops.SQRT)

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def exp2(self) -> Tensor:
        return self._to_float()._unary(Ops.EXP2)

    def exp(self) -> Tensor:
        return (self._to_float() * _LOG2_E).exp2()  # e^x = 2^(x log2 e)

    def log2(self) -> Tensor:
        return self._to_float()._unary(Ops.LOG2)

    def log(self) -> Tensor:
        return self.log2() * _LN_2  # ln x = log2(x) ln 2

    def sin(self) -> Tensor:
        return self._to_float()._unary(Ops.SIN)

    def cos(self) -> Tensor:
        # 1 - 2 sin(x/2)**2, not sin(pi/2 - x): x/2 is exact, while pi/2 - x rounds away x's low bits
        # (float32 cos(1e6) was 0.9396 for 0.9368; float64 cos(1e300) had the wrong sign)
        s = (self._to_float() * 0.5).sin()
        return 1 - 2 * s * s

    def tan(self) -> Tensor:
        return self.sin() / self.cos()

    def square(self) -> Tensor:
        return self * self

    def relu(self) -> Tensor:
        # a where, not maximum(0): its gradient at 0 is 0 (tinygrad's), where a max tie would split it
        return (self > 0).where(self, 0)

    def sigmoid(self) -> Tensor:
        return (1 + (-self._to_float()).exp()).reciprocal()

    def tanh(self) -> Tensor:
        return 2 * (2 * self._to_float()).sigmoid() - 1

    def gelu(self, approximate: str = "tanh") -> Tensor:
        """approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (the default, as tinygrad);
        "none": 0.5 x (1 + erf(x / sqrt(2)))."""
        x = self._to_float()
        if approximate == "tanh":
            return 0.5 * x * (1 + (_SQRT_2_OVER_PI * x * (1 + 0.044715 * x * x)).tanh())
        if approximate == "none":
            return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
        raise ValueError(f"gelu approximate must be 'tanh' or 'none', not {approximate!r}")

    def sign(self) -> Tensor:
        """-1, 0 or 1 in self's dtype; NaN stays NaN (numpy's: it is neither above nor below 0)."""
        out = (self > 0).where(1, (self < 0).where(-1, 0)).cast(self.dtype)
        return (self != self).where(self, out) if self.dtype.is_float else out

    def erf(self) -> Tensor:
        """The error function, Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)."""
        x = self._to_float()
        t = 1 / (1 + 0.3275911 * x.abs())
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return x.sign() * (1 - poly * (-(x * x)).exp())

    def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
        """Bound below by min_ and above by max_ (either may be None, not both). Built from wheres, not
        maximum/minimum: the gradient is 1 at a bound (tinygrad 0.14's), where a max tie would halve it;
        NaN stays NaN."""
        if min_ is None and max_ is None:
            raise tensor_args.BadArgError("clip needs min_ or max_ (or both), got neither")
        x = self if min_ is None else (self < min_).where(min_, self)
        return x if max_ is None else (x > max_).where(max_, x)

    def cast(self, dtype: DType | str) -> Tensor:
        dtype = to_dtype(dtype)
        if dtype is None:
            raise TypeError("cast needs a dtype, not None")
        if self.dtype == dtype:  # a weak tensor cast to its own dtype commits to it: a new tensor, not weak
            return Tensor(self.uop) if _is_weak(self) else self
        return Tensor(UOp(Ops.CAST, dtype, (self.uop,)))

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)

    # ------------------------------------------------------------------ reductions

    def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
        return tensor_args.axes(axis, self.ndim, self.shape, reduction=True)

    def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
        axes = self._axes(axis)
        work = tuple(a for a in axes if self.shape[a] != 1)  # reducing an axis of size 1 is a no-op
        kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        if any(self.shape[a] == 0 for a in work) and 0 not in kept:
            # a reduction over nothing is its identity (tinygrad too); a constant needs no kernel
            value = identity_element(op, self.dtype)
            out = (_weakened(_weak(value, self.dtype), False) if is_virtual(self.uop)
                   else Tensor(value, dtype=self.dtype))._broadcast_to(kept)  # (a reduction is never weak)
        else:
            out = Tensor(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, work))) if work else self
        if keepdim:
            return out.reshape(kept)
        return out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False,
            dtype: DType | str | None = None) -> Tensor:
        if dtype is None and _float_acc_dtype(self.dtype) != self.dtype:
            # a half-precision accumulator stalls (2048 + 1 == 2048 in float16): add in float32, as tinygrad
            return self.cast(dtypes.float32)._reduce(Ops.ADD, axis, keepdim).cast(self.dtype)
        return self.cast(_sum_dtype(self.dtype) if dtype is None else dtype)._reduce(Ops.ADD, axis, keepdim)

    def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False,
             dtype: DType | str | None = None) -> Tensor:
        """The product over `axis`, in `dtype` when given, else in the tensor's own dtype (tinygrad 0.14 does
        not widen a product as it widens a sum: an int8 product wraps in int8, a bool one is an all)."""
        return self.cast(self.dtype if dtype is None else dtype)._reduce(Ops.MUL, axis, keepdim)

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Ops.MAX, axis, keepdim)

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._inverse().max(axis, keepdim)._inverse()

    def _count(self, axis: int | Sequence[int] | None) -> int | Tensor:
        """The number of elements `axis` reduces; over a symbolic size a float32 scalar of the run's value
        (the bound variable), as a graph value, so a kernel reused for another binding divides by it."""
        sizes = [self.shape[a] for a in self._axes(axis)]
        n = int(prod(s for s in sizes if not isinstance(s, UOp)))
        symbolic = [Tensor(UOp(Ops.CAST, dtypes.float32, (s,))) for s in sizes if isinstance(s, UOp)]
        return n if not symbolic else functools.reduce(lambda a, b: a * b, symbolic) * n

    def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """sum / n, in float (integer tensors are averaged in float32; half precision sums and divides in
        float32, as tinygrad: n itself may not fit float16)."""
        x = self._to_float()
        return (x.sum(axis, keepdim, dtype=_float_acc_dtype(x.dtype)) / self._count(axis)).cast(x.dtype)

    def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """sum((x - mean)^2) / (n - correction), the unbiased estimate by default (as tinygrad)."""
        x = self._to_float()
        # half precision squares in float32 (as tinygrad, torch): a deviation of 256 squared is inf in float16
        xa = x.cast(_float_acc_dtype(x.dtype))
        d = xa - xa.mean(axis, keepdim=True)
        count = self._count(axis)
        n = max(0, count - correction) if isinstance(count, int) else (count - correction).maximum(0)
        return ((d * d).sum(axis, keepdim) / n).cast(x.dtype)

    def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the first maximum along `axis` (of the flattened tensor if None), as int32. As
        numpy: NaN is the maximum (the first NaN wins), and an empty axis is a ValueError."""
        ax = self._arg_reduce_axis(axis, "argmax")
        if ax is None:
            out = self.flatten().argmax(0)
            return out.reshape((1,) * self.ndim) if keepdim else out
        n = self.shape[ax]
        is_max = self == self.max(ax, keepdim=True)
        if self.dtype.is_float:  # the max of an axis with a NaN is NaN, equal to nothing: pick the NaNs
            is_max = is_max | (self != self)
        # counting down, the first maximum has the largest index from the end
        from_end = Tensor.arange(n - 1, -1, -1).reshape(tuple(n if i == ax else 1 for i in range(self.ndim)))
        return (n - 1) - is_max.where(from_end, 0).max(ax, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        self._arg_reduce_axis(axis, "argmin")
        return self._inverse().argmax(axis, keepdim)  # -NaN is NaN: the first NaN wins here too

    def _arg_reduce_axis(self, axis: Any, name: str) -> int | None:
        """The one axis of argmax/argmin (None: the flattened tensor, also for axis 0 or -1 of a 0-d
        tensor, as numpy); an empty one is numpy's ValueError."""
        if axis is not None and self.ndim == 0:
            tensor_args.axis(axis, 1, self.shape)
            axis = None
        if axis is None:
            if self.numel() == 0:
                raise ValueError(f"attempt to get {name} of an empty sequence: the shape is {self.shape}")
            return None
        ax = _norm_axis(axis, self.ndim, self.shape)
        if self.shape[ax] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence: axis {axis} of shape {self.shape}")
        return ax

    # ------------------------------------------------------------------ movement

    def reshape(self, shape: Any, *args: int) -> Tensor:
        """New shape of the same size; one -1 is inferred, None keeps that axis."""
        new = _shape_args(shape, args)
        if any(s is None for s in new[self.ndim:]):
            raise tensor_args.BadArgError(f"cannot reshape {self.shape} to {new}: None keeps an axis, and there is none there")
        new = tuple(self.shape[i] if s is None else s for i, s in enumerate(new))
        if new.count(-1) > 1 or any(isinstance(s, int) and s < -1 for s in new):
            raise tensor_args.BadArgError(f"cannot reshape {self.shape} to {new}")
        if not all(isinstance(s, int) for s in (*self.shape, *new)):
            return self._symbolic_reshape(new)
        if -1 in new:
            known = int(prod(s for s in new if s != -1))
            if known == 0 or self.numel() % known:
                raise tensor_args.BadArgError(f"cannot reshape {self.shape} to {new}")
            new = tuple(self.numel() // known if s == -1 else s for s in new)
        if prod(new) != self.numel():
            raise tensor_args.BadArgError(f"cannot reshape {self.shape} to {new}")
        return self if new == self.shape else self._mop(Ops.RESHAPE, new)

    def _symbolic_reshape(self, new: tuple) -> Tensor:
        """A reshape where a size is symbolic: it may add, drop, merge or split only the axes of constant
        size; the symbolic ones stay as they are, in order (one -1 is inferred from the constant ones)."""
        asked = new
        sym_old = [d for d in self.shape if not isinstance(d, int)]
        sym_new = [d for d in new if not isinstance(d, int)]
        ints_old = int(prod(d for d in self.shape if isinstance(d, int)))
        ints_new = int(prod(d for d in new if isinstance(d, int) and d != -1))
        if -1 in new and ints_new and ints_old % ints_new == 0:
            new = tuple(ints_old // ints_new if s == -1 else s for s in new)
            ints_new = ints_old
        if len(sym_old) != len(sym_new) or any(a is not b for a, b in zip(sym_old, sym_new)) or ints_old != ints_new:
            raise tensor_args.BadArgError(f"cannot reshape {self.shape} to {asked}: with symbolic sizes, only the axes of "
                             "constant size may change; the symbolic ones stay as they are")
        return self if new == self.shape else self._mop(Ops.RESHAPE, new)

    def expand(self, shape: Any, *args: int) -> Tensor:
        """Repeat axes of size 1; -1 keeps an axis; more axes than self are added in front."""
        new = _shape_args(shape, args)
        if len(new) < self.ndim:
            raise ValueError(f"cannot expand {self.shape} to {new}")
        old = (1,) * (len(new) - self.ndim) + self.shape
        new = tuple(o if s is None or s == -1 else s for o, s in zip(old, new))
        if any(o is not s and o != s and o != 1 for o, s in zip(old, new)) or any(isinstance(s, int) and s < 0 for s in new):
            raise ValueError(f"cannot expand {self.shape} to {new}")
        x = self.reshape(old)
        return x if new == x.shape else x._mop(Ops.EXPAND, new)

    def permute(self, order: Any, *args: int) -> Tensor:
        axes = tensor_args.int_tuple(order, args, "permutation")
        if len(axes) != self.ndim or any(not -self.ndim <= a < self.ndim for a in axes) \
                or sorted(a % self.ndim for a in axes) != list(range(self.ndim)):
            raise tensor_args.BadArgError(f"bad permutation {axes} for shape {self.shape}")
        axes = tuple(a % self.ndim for a in axes)
        return self if axes == tuple(range(self.ndim)) else self._mop(Ops.PERMUTE, axes)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        order = list(range(self.ndim))
        a, b = (_norm_axis(d, self.ndim, self.shape) for d in tensor_args.int_tuple((dim0, dim1), (), "axis"))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:
        """`transpose(1, 0)` as in tinygrad (numpy's .T reverses all axes; the same for 2-d)."""
        return self.transpose()

    def _norm_padding(self, padding: Any) -> tuple[tuple[int, int], ...]:
        return tensor_args.pad_pairs(padding, self.ndim, self.shape)

    def pad(self, padding: Any, mode: str = "constant", value: Scalar = 0.0) -> Tensor:
        """Pad: ((before, after), ...) per axis (None: no padding), or torch-style flat ints. `mode` is
        "constant" (with `value`; negative amounts crop), "reflect", "replicate" or "circular"."""
        pads = self._norm_padding(padding)
        symbolic = any(isinstance(v, UOp) for pair in pads for v in pair)  # each >= 0 (pad_pairs checks)
        if mode != "constant":
            if symbolic:
                raise ValueError(f"{mode} padding {padding} of shape {self.shape}: a symbolic amount is only "
                                 "taken by a constant pad")
            return self._pad_from_edges(pads, mode)
        crop, grow = _split_pads(pads)
        # crops overlap (a symbolic size: for some value its variable can be bound to)
        smallest = [s if isinstance(s, int) else s.vmin for s in self.shape]
        if any(s - b - a < 0 for s, (b, a) in zip(smallest, crop)):
            raise ValueError(f"bad padding {padding} for shape {self.shape}")
        x = self.shrink(tuple((b, s - a if a else s) for s, (b, a) in zip(self.shape, crop)))
        if not any(isinstance(v, UOp) or v for pair in grow for v in pair):
            return x
        padded = x._mop(Ops.PAD, grow)
        if type(value) in (int, float) and value == 0:  # PAD fills zeros itself
            return padded
        # PAD fills zeros: select the fill value where a padded mask of True is False (promoting as `where`)
        inside = _weak(True, dtypes.bool)._broadcast_to(x.shape)._mop(Ops.PAD, grow)
        return inside.where(padded, value)

    def _pad_from_edges(self, pads: tuple[tuple[int, int], ...], mode: str) -> Tensor:
        """reflect / replicate / circular padding: pieces of the tensor itself, concatenated per axis.
        Negative amounts crop, as tinygrad orders it: reflect and replicate pad the whole tensor and then
        crop (a crop may cut into the padding), circular crops first and wraps what is left."""
        if mode not in ("reflect", "replicate", "circular"):
            raise tensor_args.ModeError(f"pad mode must be constant, reflect, replicate or circular, not {mode!r}")
        crops = tuple((min(b, 0), min(a, 0)) for b, a in pads)
        if mode != "circular":
            grown = self._pad_from_edges_grow(pads, mode)
            if any(n + b + a < 0 for n, (b, a) in zip(grown.shape, crops)):
                raise ValueError(f"{mode} padding {pads} crops more than the shape {self.shape} holds")
            return grown.pad(crops)
        return self.pad(crops)._wrap_around(pads)

    def _wrap_around(self, pads: tuple[tuple[int, int], ...]) -> Tensor:
        """Circular padding by the positive amounts of `pads`, as a view: each padded axis repeated three
        times, then the window [n - before, 2n + after) of it (no kernel for a stored tensor)."""
        grow = [(max(b, 0), max(a, 0)) for b, a in pads]
        for ax, (b, a) in enumerate(grow):
            n = self.shape[ax]
            if (b or a) and (n == 0 or max(b, a) > n):
                raise tensor_args.BadArgError(f"circular padding {pads[ax]} does not fit axis {ax} of shape {self.shape}")
        if not any(b or a for b, a in grow):
            return self
        reps = tuple(3 if b or a else 1 for b, a in grow)
        return self.repeat(reps).shrink(tuple((n - b, 2 * n + a) if r == 3 else None
                                              for n, (b, a), r in zip(self.shape, grow, reps)))

    def _pad_from_edges_grow(self, pads: tuple[tuple[int, int], ...], mode: str) -> Tensor:
        """The positive amounts of `pads` in reflect or replicate mode (the negative ones are the caller's
        crops)."""
        x = self
        for ax, (b, a) in enumerate((max(b, 0), max(a, 0)) for b, a in pads):
            n = x.shape[ax]
            too_far = max(b, a) > (n - 1 if mode == "reflect" else math.inf)
            if (b or a) and (n == 0 or too_far):  # nothing to copy from, or a copy past the other edge
                raise tensor_args.BadArgError(f"{mode} padding {pads[ax]} does not fit axis {ax} of shape {self.shape}")
            if not (b or a):
                continue
            if mode == "reflect":
                left, right = _along(x, ax, 1, b + 1).flip(ax), _along(x, ax, n - 1 - a, n - 1).flip(ax)
            else:
                left, right = _along(x, ax, 0, 1, repeat=max(b, 1)), _along(x, ax, n - 1, n, repeat=max(a, 1))
            x = Tensor.cat(*[t for t, k in ((left, b), (x, n), (right, a)) if k], dim=ax)
        return x

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep [start, end) of each axis (None: all of it)."""
        bounds = tensor_args.shrink_bounds(arg, self.shape)
        return self if all(b == 0 and e == s for s, (b, e) in zip(self.shape, bounds)) \
            else self._mop(Ops.SHRINK, bounds)

    def flip(self, axis: int | Sequence[int], *args: int) -> Tensor:
        axes = tensor_args.axes((axis, *args) if args else axis, self.ndim, self.shape)
        return self._mop(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes else self

    def unsqueeze(self, dim: int) -> Tensor:
        d = _norm_axis(dim, self.ndim + 1, self.shape)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim: int | None = None) -> Tensor:
        """Drop axes of size 1 (all of them, or `dim` if it has size 1; otherwise unchanged, as tinygrad)."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        if self.ndim == 0:  # its only axis is 0 (or -1), as tinygrad and torch
            tensor_args.axis(dim, 1, self.shape)
            return self
        d = _norm_axis(dim, self.ndim, self.shape)
        return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:  # its only axis is 0 (or -1), as tinygrad
            tensor_args.axis(start_dim, 1, self.shape), tensor_args.axis(end_dim, 1, self.shape)
            return self.reshape(1)
        a, b = _norm_axis(start_dim, self.ndim, self.shape), _norm_axis(end_dim, self.ndim, self.shape)
        return self.reshape(self.shape[:a] + (int(prod(self.shape[a:b + 1])),) + self.shape[b + 1:])

    def __getitem__(self, key: Any) -> Tensor:
        """numpy indexing: ints (negative too), slices with any step, `...`, None, and integer index
        tensors / lists / arrays (advanced indexing: they broadcast together; their axes go where the
        first of them was if they are adjacent, else in front, as numpy). An index tensor selects with a
        one-hot mask summed over the axis, so an out-of-range index gives 0 (tinygrad's behaviour)."""
        items = self._expand_key(key)
        x, kept, adv = self._basic_index(items)
        if not adv:
            return x
        return x._advanced_index(kept, adv, items)

    def _basic_index(self, items: list[Any]) -> tuple[Tensor, list[Any], list[tuple[int, Tensor]]]:
        """Apply ints, slices and None; index tensors keep their axis whole for `_advanced_index`.
        Returns the tensor, what each of its axes came from (an item), and (axis, index) per tensor index."""
        flips, bounds, steps, shape, kept, adv = self._parse_basic(items)
        x = self.flip([i for i, f in enumerate(flips) if f]) if any(flips) else self
        x = x._strided_shrink(bounds, steps)
        if tuple(shape) != x.shape:  # ints dropped or Nones added axes (a symbolic axis is never reshaped)
            x = x.reshape(tuple(shape))
        return x, kept, [(ax, _index_tensor(k, shape[ax])) for ax, k in adv]

    def _parse_basic(self, items: list[Any]) -> tuple[list[bool], list[tuple[int, int]], list[int], list[int],
                                                      list[Any], list[tuple[int, Any]]]:
        """Per axis of self: flipped?, [start, end) in the flipped axis, step; the result's shape (None
        adds a 1, an int drops its axis) with the item each result axis came from; the tensor indices."""
        flips, bounds, steps, shape, kept, adv = [], [], [], [], [], []
        dim = 0
        for k in items:
            if k is None:
                shape.append(1)
                kept.append(None)
                continue
            size = self.shape[dim]
            if isinstance(k, slice) and (not isinstance(size, int) or any(isinstance(e, UOp) for e in (k.start, k.stop, k.step))):
                # a symbolic bound or size: no clamping, so every bound must lie in the axis for every binding;
                # a negative int bound counts from the (symbolic) end: x[:v][-1] is element v - 1
                if k.step not in (None, 1):
                    raise IndexError(f"slice {k} of axis {dim} of shape {self.shape}: a symbolic slice takes step 1")
                start, stop = 0 if k.start is None else k.start, size if k.stop is None else k.stop
                if any(isinstance(e, int) and e < 0 for e in (start, stop)):
                    if isinstance(size, int):
                        raise IndexError(f"slice {k} of axis {dim} of shape {self.shape}: a negative bound and a "
                                         "symbolic one in one slice are not taken")
                    start, stop = (size_sum(size, e) if isinstance(e, int) and e < 0 else e for e in (start, stop))
                    if any(not isinstance(e, int) and e.vmin < 0 for e in (start, stop)):
                        raise IndexError(f"slice {k} of axis {dim} of shape {self.shape}: a bound from the end is "
                                         f"before the start of the axis for its smallest size {size.vmin}")
                flips.append(False)
                bounds.append((start, stop))
                steps.append(1)
                shape.append(shrink_span(start, stop))
                kept.append(k)
            elif isinstance(k, slice):
                start, stop, step = k.indices(size)
                n = len(range(start, stop, step))
                if step < 0:  # read the axis backwards: position p is size-1-p
                    start, step = size - 1 - start, -step
                flips.append(k.step is not None and k.step < 0)
                bounds.append((start, start + n * step) if n else (start, start))
                steps.append(step)
                shape.append(n)
                kept.append(k)
            elif _is_variable(k):
                # a bound variable picks one element, wherever its value puts it: a window (v, v + 1)
                if not 0 <= k.vmin or not k.vmax < (size if isinstance(size, int) else size.vmin):
                    raise IndexError(f"index {k.src[0].arg[0] if k.op is Ops.BIND else k.arg[0]} (from {k.vmin} to "
                                     f"{k.vmax}) is not in range for axis {dim} of shape {self.shape} for every value")
                flips.append(False)
                bounds.append((k, k + 1))
                steps.append(1)
            elif isinstance(k, (int, np.integer)) and not isinstance(size, int):
                # a symbolic axis: an index must be in range for every value its variable can be bound to
                i = int(k)
                if not -size.vmin <= i < size.vmin:
                    raise IndexError(f"index {k} on the symbolic axis {dim} of shape {self.shape}: only {-size.vmin} "
                                     f"<= index < {size.vmin} (its smallest size) is in range for every binding")
                flips.append(False)
                bounds.append((i, i + 1) if i >= 0 else (size_sum(size, i), size_sum(size, i + 1)))
                steps.append(1)
            elif isinstance(k, (int, np.integer)):
                i = int(k) + size if k < 0 else int(k)
                if not 0 <= i < size:
                    raise IndexError(f"index {k} is out of bounds for axis {dim} of shape {self.shape}")
                flips.append(False)
                bounds.append((i, i + 1))
                steps.append(1)
            else:
                flips.append(False)
                bounds.append((0, size))
                steps.append(1)
                adv.append((len(shape), k))
                shape.append(size)
                kept.append(k)
            dim += 1
        return flips, bounds, steps, shape, kept, adv

    def _strided_shrink(self, bounds: list[tuple[int, int]], steps: list[int]) -> Tensor:
        """Keep [start, end) of each axis, every step-th element: pad the range to a multiple of the step,
        split it (n, step) and keep column 0."""
        x = self.shrink(tuple((b, min(e, s) if isinstance(e, int) and isinstance(s, int) else e)
                              for (b, e), s in zip(bounds, self.shape)))
        if all(st == 1 for st in steps):
            return x
        x = x.pad(tuple((0, (e - b) - n) for (b, e), n in zip(bounds, x.shape)))
        split = _flat((n // st, st) if st > 1 else (n, 1) for n, st in zip(x.shape, steps))
        x = x.reshape(split).shrink(_flat(((0, split[2 * i]), (0, 1)) for i in range(len(steps))))
        return x.reshape(split[0::2])

    def _advanced_index(self, kept: list[Any], adv: list[tuple[int, Tensor]], items: list[Any]) -> Tensor:
        """Select along the axes `adv` names, all at once: a mask that is True where every index matches.
        Several indices select from their axes flattened into one, by one linear index (as tinygrad): one
        comparison per element of that axis, which the scheduler folds into a read at the index, where
        a mask per axis would loop over every element of all of them."""
        sizes = [self.shape[ax] for ax, _ in adv]
        if len(adv) > 1 and all(isinstance(n, int) for n in sizes) and prod(sizes) - 1 <= dtypes.int32.max:
            # (a flat place past int32 is not an index a kernel can compute: each axis keeps its own mask)
            mask, bshape, axes, rest = self._linear_mask(adv, over_rest=True)
            shapes = (int(prod(self.shape[a] for a in axes)),)
        else:
            mask, bshape, axes, rest = self._advanced_mask(adv, over_rest=True)
            shapes = tuple(self.shape[a] for a in axes)
        nr, nb = len(rest), len(bshape)
        x = self.permute(rest + axes).reshape(tuple(self.shape[a] for a in rest) + (1,) * nb + shapes)
        out = mask.where(x, 0).sum(tuple(range(nr + nb, nr + nb + len(shapes)))).cast(self.dtype)
        return out.permute(_advanced_order(kept, axes, items, nr, nb))

    def _index_parts(self, adv: list[tuple[int, Tensor]]) -> tuple[list[Tensor], tuple[int, ...], list[int], list[int]]:
        """The index tensors of `adv` (one dtype, broadcast together), their shape, the indexed axes and the
        other axes."""
        idx = Tensor._operands(*(t for _, t in adv), dtype=least_upper_dtype(*(t.dtype for _, t in adv)))
        axes = [ax for ax, _ in adv]
        return idx, idx[0].shape, axes, [a for a in range(self.ndim) if a not in axes]

    def _rest_shape(self, rest: list[int], over_rest: bool) -> tuple[int, ...]:
        """The mask's shape along the other axes. With `over_rest` each index is broadcast over them before
        it is compared, so the comparison is made where the mask is read: an index computed by a reduce
        (`t[t.sum(1).argmax()]`) is then broadcast itself, and its mask needs no buffer of its own (as
        tinygrad 0.14 builds it)."""
        return tuple(self.shape[a] for a in rest) if over_rest else (1,) * len(rest)

    def _linear_mask(self, adv: list[tuple[int, Tensor]], over_rest: bool = False) -> \
            tuple[Tensor, tuple[int, ...], list[int], list[int]]:
        """As `_advanced_mask`, with the indexed axes flattened into one (row-major, in the order of `adv`):
        the mask compares one linear index with each of its places; a tuple of indices with any index
        out of range (after counting negatives from the end) is -1, so it selects nothing."""
        idx, bshape, axes, rest = self._index_parts(adv)
        sizes = [self.shape[a] for a in axes]
        total = int(prod(sizes))
        wide = idx[0].dtype.itemsize >= 4 and idx[0].dtype != dtypes.int32
        dt = dtypes.int64 if wide else dtypes.int32  # holds every index value, every n, and the linear index
        linear, valid = None, None
        for t, n in zip(idx, sizes):
            t = t.cast(dt)
            t = (t < 0).where(t + n, t)
            ok = (t >= 0) & (t < n)
            linear = t if linear is None else linear * n + t
            valid = ok if valid is None else valid & ok
        assert linear is not None and valid is not None
        linear = valid.where(linear, -1)
        hit = _place_hits(linear, Tensor.arange(total, dtype=dt), self._rest_shape(rest, over_rest), bshape, 0, 1)
        return hit, bshape, axes, rest

    def _advanced_mask(self, adv: list[tuple[int, Tensor]], over_rest: bool = False) -> \
            tuple[Tensor, tuple[int, ...], list[int], list[int]]:
        """The selection mask (the other axes: 1s, or their sizes with `over_rest`; the broadcast index
        shape, then the indexed axes), the broadcast index shape, the indexed axes and the other axes."""
        idx, bshape, axes, rest = self._index_parts(adv)
        rest_shape = self._rest_shape(rest, over_rest)
        mask = None
        for j, (ax, t) in enumerate(zip(axes, idx)):
            n = self.shape[ax]
            if t.dtype.kind == "int" and t.dtype.max < n:  # x[int8(-1)] on 200 places is place 199: no wrap
                t = t.cast(dtypes.int64 if n > dtypes.int32.max else dtypes.int32)
            t = (t < 0).where(t + n, t)
            positions = Tensor.arange(n, dtype=dtypes.int64 if n - 1 > dtypes.int32.max else None)  # past int32: int64
            hit = _place_hits(t, positions, rest_shape, bshape, j, len(axes))
            mask = hit if mask is None else mask & hit
        assert mask is not None
        return mask, bshape, axes, rest

    def __setitem__(self, key: Any, value: Any) -> None:
        """`self[key] = value`, numpy's: keys as `__getitem__`; the value a Tensor of self's dtype or
        Python data (converted to self's dtype), broadcast to the indexed shape; where tensor indices
        repeat a place, the last write wins (an out-of-range index writes nothing, as tinygrad). A tensor
        with storage (realized, or a view of realized data) is assigned the updated value; a computed one
        has no buffer to write, so it becomes the updated value (tinygrad 0.14 does the same), and so do
        the computed tensors it is a view of (numpy's; tinygrad 0.14 leaves those)."""
        items = self._expand_key(key)
        target = self[key]  # the indexed shape; bad keys raise here
        merged = self._merged_at(items, self._setitem_value(value, target.shape))
        if _view_of_storage(self.uop)[0] is None:
            if not isinstance(self.device, tuple):  # the tensors self is a view of see the write too
                for src, value in _views_of_computed(self, merged.uop):
                    src.uop = value
            self.uop = merged.uop
        else:
            self.assign(merged)

    def __delitem__(self, key: Any) -> None:
        raise TypeError(f"a Tensor {self.shape} does not support item deletion (del x[{key!r}]); its shape is fixed")

    def _setitem_value(self, value: Any, shape: tuple[int, ...]) -> Tensor:
        """The value of a setitem, of self's dtype and broadcast to the indexed `shape`."""
        if isinstance(value, Tensor):
            if _is_weak(value) and _kind(value.dtype) <= _kind(self.dtype):
                value = _commit_weak(value, self.dtype)  # a weak value takes the target's dtype, as a scalar
            if value.dtype != self.dtype:
                raise ValueError(f"setitem: cannot write a {value.dtype.name} tensor {value.shape} into a "
                                 f"{self.dtype.name} tensor {self.shape}; cast the value first")
            v = value
        elif isinstance(value, (bool, int, float, np.generic)):
            v = _weak(value.item() if isinstance(value, np.generic) else value, self.dtype)
        else:
            v = Tensor(np.asarray(value), device=self.device, dtype=self.dtype)
        while v.ndim > len(shape) and v.shape[0] == 1:  # numpy drops leading 1s of a value
            v = v.reshape(v.shape[1:])
        try:
            return v._broadcast_to(shape)
        except ValueError:
            raise ValueError(f"setitem: a value of shape {v.shape} does not broadcast to the indexed shape "
                             f"{shape} of a tensor {self.shape}") from None

    def _merged_at(self, items: list[Any], v: Tensor) -> Tensor:
        """self with the places `items` index taking `v` (of the indexed shape): v and a mask of where it
        goes are moved back through the inverse of each indexing step, then one where."""
        flips, bounds, steps, shape, kept, adv = self._parse_basic(items)
        mask: Tensor | None = None
        if adv:
            x, kept, advt = self._basic_index(items)
            v, mask = x._advanced_scatter(kept, advt, items, v)
        # drop the axes None added, put back the axes ints took (size 1)
        ns = tuple(shrink_span(b, e) if st == 1 else (e - b) // st for (b, e), st in zip(bounds, steps))
        v = v.reshape(ns)
        if mask is None:
            # every place is written only when each axis is whole and unstrided (x[::2] is not)
            if all(b == 0 and e == n and st == 1 for (b, e), n, st in zip(bounds, self.shape, steps)):
                return v.flip([i for i, f in enumerate(flips) if f]) if any(flips) else v
            mask = _weak(True, dtypes.bool)._broadcast_to(ns)
        mask = mask.reshape(ns)
        v, mask = (_unstride(t, bounds, steps, self.shape, flips) for t in (v, mask))
        return mask.where(v, self)

    def _advanced_scatter(self, kept: list[Any], adv: list[tuple[int, Tensor]], items: list[Any],
                          v: Tensor) -> tuple[Tensor, Tensor]:
        """The inverse of `_advanced_index`: (values, written mask) of self's shape, v (the indexed shape)
        put where the indices point; of several writes to one place, the last in index order wins."""
        mask, bshape, axes, rest = self._advanced_mask(adv)
        nr, nb, k = len(rest), len(bshape), len(axes)
        order = _advanced_order(kept, axes, items, nr, nb)
        v = v.permute(sorted(range(len(order)), key=order.__getitem__))  # to (rest..., index shape...)
        nbig = int(prod(bshape))
        if nbig == 0:  # no index: nothing is written
            return self, _weak(False, dtypes.bool)._broadcast_to(self.shape)
        mask = mask.reshape((1,) * nr + (nbig,) + mask.shape[nr + nb:])
        vals = v.reshape(v.shape[:nr] + (nbig,) + (1,) * k)
        if nbig <= _UNROLLED_WRITES:
            # a few writes: fold them in order with wheres (elementwise, fuses into the assign's kernel)
            written, new = last_writer_chain(mask, vals, nr)
        else:  # many: the last writer of each place is a max over positions, then one masked sum
            pos = Tensor.arange(nbig).reshape((1,) * nr + (nbig,) + (1,) * k)
            last = mask.where(pos, -1).max(nr, keepdim=True)
            # the value of the last writer: a one-hot pick at `last` (the scheduler reads it there, no loop)
            new = (last == pos).where(vals, 0).sum(nr)
            written = (last >= 0).squeeze(nr)
        new = new._broadcast_to(tuple(self.shape[a] for a in rest + axes)).cast(self.dtype)
        back = sorted(range(self.ndim), key=(rest + axes).__getitem__)
        shape = tuple(self.shape[a] for a in rest + axes)
        return new.permute(back), written._broadcast_to(shape).permute(back)

    def _expand_key(self, key: Any) -> list[Any]:
        if isinstance(key, list) and not all(isinstance(k, (int, np.integer)) for k in key):
            # only a flat list of ints is one index; any other list (of lists, slices, None, ..., tensors)
            # is a tuple of indices, as in tinygrad and torch: x[[rows, cols]] is x[rows, cols]
            key = tuple(key)
        key = list(key) if isinstance(key, tuple) else [key]
        key = [_nested_list(k) if isinstance(k, tuple) else k for k in key]  # a tuple inside is a list of indices
        for k in key:
            ok = k is None or k is Ellipsis or isinstance(k, (slice, Tensor, list, np.ndarray)) or _is_variable(k) or \
                (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)))
            if not ok:  # an IndexError as numpy and tinygrad raise (x[0.0]), and a TypeError
                raise tensor_args.IndexDTypeError(f"unsupported index {k!r}: an index is one of integers (an int, a bound "
                                                  "variable, an integer tensor or list), a slice, ... or None")
        ells = [i for i, k in enumerate(key) if k is Ellipsis]  # by identity: `==` on a Tensor builds a graph
        if len(ells) > 1:
            raise IndexError("an index can only have a single ellipsis")
        real = sum(k is not None and k is not Ellipsis for k in key)
        if real > self.ndim:
            raise IndexError(f"too many indices for shape {self.shape}")
        fill = [slice(None)] * (self.ndim - real)
        if ells:
            return key[:ells[0]] + fill + key[ells[0] + 1:]
        return key + fill

    def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
        """Concatenate along `dim`: each part padded to the full size, then added (one elementwise op)."""
        parts = (self, *args)
        _check_tensors("cat", args)
        _same_device(parts)
        d = _norm_axis(dim, self.ndim, self.shape)
        for t in args:
            if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
                raise ValueError(f"cannot cat {self.shape} with {t.shape} along dim {dim}")
        if not args:
            return self
        if all(t.uop is self.uop for t in args):
            # one tensor after itself is a repeat: one read of it per element, so a shared reduce or a
            # costly value is not buffered for the pieces' different reads
            return self.repeat(tuple(len(parts) if i == d else 1 for i in range(self.ndim)))
        dt = _promote(parts)  # a weak part takes the others' dtype, as in an elementwise op
        # sizes may be symbolic (`a[:v].cat(b)`): offsets and amounts are size sums, ints where they can be
        sizes = [t.shape[d] for t in parts]
        total = size_sum(*sizes)
        offsets = [size_sum(*sizes[:k]) for k in range(len(parts))]
        padded = [(_commit_weak(t, dt) if _is_weak(t) else t.cast(dt)).pad(tuple((o, size_sum(total, (o, -1), (n, -1))) if i == d else (0, 0)
                                       for i in range(self.ndim))) for t, o, n in zip(parts, offsets, sizes)]
        return _weakened(functools.reduce(Tensor.add, padded), all(_is_weak(t) for t in parts))

    def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
        """`a.stack(b, c)`, `Tensor.stack(a, b, c)` or `Tensor.stack((a, b, c))`: a new axis `dim`."""
        if isinstance(self, (tuple, list)):  # Tensor.stack(sequence): the sequence is all the tensors
            if args or not self:
                raise ValueError(f"stack takes the tensors as one sequence or as arguments, not both: {self!r}, {args!r}")
            return Tensor.stack(*self, dim=dim)
        _check_tensors("stack", args)
        d = _norm_axis(dim, self.ndim + 1, self.shape)
        for t in args:
            if t.shape != self.shape:
                raise ValueError(f"cannot stack {self.shape} with {t.shape}")
        return self.unsqueeze(d).cat(*(t.unsqueeze(d) for t in args), dim=d)

    # ------------------------------------------------------------------ composites

    def matmul(self, w: Tensor, reverse: bool = False, dtype: DType | str | None = None) -> Tensor:
        """numpy's matmul: (..., n, k) @ (..., k, m), batch axes broadcast, 1-d operands promoted and
        dropped. Built as one multiply and one sum over k (the last axis), accumulated in `dtype` when
        given. `reverse`: w @ self."""
        w = w if isinstance(w, Tensor) else Tensor(w)
        if reverse:
            return w.matmul(self, dtype=dtype)
        if self.ndim == 0 or w.ndim == 0:
            raise tensor_args.BadArgError(f"cannot matmul {self.shape} with {w.shape}: 0-d operand")
        x = self.reshape(1, -1) if self.ndim == 1 else self
        y = w.reshape(-1, 1) if w.ndim == 1 else w
        if x.shape[-1] != y.shape[-2]:
            raise tensor_args.BadArgError(f"cannot matmul {self.shape} with {w.shape}: inner dimensions "
                             f"{x.shape[-1]} and {y.shape[-2]} differ")
        try:
            _broadcast_shape(x.shape[:-2], y.shape[:-2])
        except ValueError:
            raise tensor_args.BadArgError(f"cannot matmul {self.shape} with {w.shape}: batch dimensions "
                             f"do not broadcast") from None
        n, k, m = x.shape[-2], x.shape[-1], y.shape[-1]
        xe = x.reshape(x.shape[:-2] + (n, 1, k))
        ye = y.transpose(-1, -2).reshape(y.shape[:-2] + (1, m, k))
        if dtype is not None:  # products in the accumulation dtype too: int8 @ int8 -> int32 must not wrap
            xe, ye = xe.cast(dtype), ye.cast(dtype)
        out = (xe * ye).sum(-1, dtype=dtype)
        if dtype is None:  # a small int sum accumulates in int32; the product keeps the operands' dtype (numpy's)
            out = out.cast(_promote((self, w)))  # (a weak operand takes the other's dtype)
        if self.ndim == 1:
            out = out.squeeze(-2)
        if w.ndim == 1:
            out = out.squeeze(-1)
        return out

    def dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
        return self.matmul(w, dtype=dtype)

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """x @ weight + bias (a 1-d weight scales elementwise, as tinygrad)."""
        x = self * weight if weight.ndim == 1 else self.matmul(weight)
        return x if bias is None else x + bias

    def sequential(self, layers: Sequence[Callable[[Tensor], Tensor]]) -> Tensor:
        return functools.reduce(lambda x, f: f(x), layers, self)

    def softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
        x = self.cast(dtype) if dtype is not None else self
        e = (x._to_float() - x.max(axis, keepdim=True).detach()).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
        x = self.cast(dtype) if dtype is not None else self
        # the shift by the max cancels in the result, so its gradient is zero: detached, the backward pass
        # has no tie-counting reduces through the max (as tinygrad's)
        m = x._to_float() - x.max(axis, keepdim=True).detach()
        return m - m.exp().sum(axis, keepdim=True).log()

    def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(mean((x - mean)^2) + eps), without affine parameters."""
        x = self._to_float()
        xa = x.cast(_float_acc_dtype(x.dtype))  # half precision in float32 (as var): y * y may pass 65504
        y = xa - xa.mean(axis, keepdim=True)
        return (y * ((y * y).mean(axis, keepdim=True) + eps).rsqrt()).cast(x.dtype)

    def cumsum(self, axis: int = 0) -> Tensor:
        """Running sum along `axis`: out[j] = sum over i <= j, a masked sum with a triangular mask built
        from arange comparisons (one reduction). A 0-d tensor is its own running sum (axis 0 or -1, as
        tinygrad), in the dtype of a sum."""
        if self.ndim == 0:
            tensor_args.axes(axis, 0, (), reduction=True)
            return self.cast(_sum_dtype(self.dtype))
        ax = _norm_axis(axis, self.ndim, self.shape)
        n = self.shape[ax]
        x = self.transpose(ax, -1)
        idx = Tensor.arange(n)
        lower = idx.reshape(n, 1) >= idx.reshape(1, n)  # [j, i]: i <= j
        return lower.where(x.unsqueeze(-2), 0).sum(-1).transpose(ax, -1)

    def _pool(self, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...] | None = None) -> Tensor:
        """Sliding windows with dilation: out[..., o, k] = self[..., o*s + k*d]. The dense windows of span
        d*(k-1)+1, padded to d*k and split (k, d), keep the first of every d."""
        if dilation is None or all(d == 1 for d in dilation):
            return self._pool_dense(kernel, stride)
        x = self._pool_dense(tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation)), stride)
        lead = x.shape[:-len(kernel)]
        x = x.pad(((0, 0),) * len(lead) + tuple((0, d - 1) for d in dilation))
        x = x.reshape(lead + _flat(zip(kernel, dilation)))
        x = x.shrink(tuple((0, s) for s in lead) + _flat(((0, k), (0, 1)) for k in kernel))
        return x.reshape(lead + tuple(kernel))

    def _pool_dense(self, kernel: tuple[int, ...], stride: tuple[int, ...]) -> Tensor:
        """Sliding windows over the last len(kernel) axes with movement ops only:
        (..., i1, i2) -> (..., o1, o2, k1, k2), out[..., o, k] = self[..., o*s + k].

        Per axis of size i: repeat it e times and flatten (position p holds x[p mod i]); rows of i+1 make
        row k start at x[k]; taking every s-th column of a row gives x[o*s + k]."""
        nk, pre = len(kernel), self.shape[:-len(kernel)]
        ins = self.shape[-nk:]
        outs = tuple((i - k) // s + 1 for i, k, s in zip(ins, kernel, stride))
        reps = tuple(math.ceil(k * (i + 1) / i) for i, k in zip(ins, kernel))
        keep = ((0, s) for s in pre)
        x = self.reshape(pre + _flat((1, i) for i in ins)).expand(pre + _flat(zip(reps, ins)))
        x = x.reshape(pre + tuple(e * i for e, i in zip(reps, ins)))
        x = x.shrink(tuple(keep) + tuple((0, k * (i + 1)) for i, k in zip(ins, kernel)))
        x = x.reshape(pre + _flat((k, i + 1) for i, k in zip(ins, kernel)))
        # make each row exactly o*s long: shrink, or pad when s > k+1 (padding is never selected)
        lens = _flat((k, o * s) for k, o, s in zip(kernel, outs, stride))
        x = x.shrink(tuple((0, s) for s in pre) + tuple((0, min(n, m)) for n, m in zip(x.shape[len(pre):], lens)))
        x = x.pad(((0, 0),) * len(pre) + tuple((0, m - n) for n, m in zip(x.shape[len(pre):], lens)))
        x = x.reshape(pre + _flat((k, o, s) for k, o, s in zip(kernel, outs, stride)))
        x = x.shrink(tuple((0, s) for s in pre) + _flat(((0, k), (0, o), (0, 1)) for k, o in zip(kernel, outs)))
        x = x.reshape(pre + _flat(zip(kernel, outs)))
        p = len(pre)
        outs_axes, kernel_axes = tuple(p + 2 * d + 1 for d in range(nk)), tuple(p + 2 * d for d in range(nk))
        return x.permute(tuple(range(p)) + outs_axes + kernel_axes)

    def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | Sequence[int] = 1,
               dilation: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
               dtype: DType | str | None = None) -> Tensor:
        """Convolution (cross-correlation, as torch/tinygrad) over the weight's spatial axes: NCHW input
        with an OIHW weight, and likewise 1-d (NCL / OIL) or 3-d, as tinygrad's conv2d. Arguments in
        tinygrad's order. `padding` is an int, one int per spatial axis, or torch-style pairs, last axis
        first ((left, right, top, bottom) in 2-d). Windows come from movement ops (`_pool`), so the whole
        convolution is one multiply and one sum, accumulated in `dtype` when given."""
        nd = weight.ndim - 2
        if nd < 1 or self.ndim != weight.ndim:
            raise tensor_args.WindowShapeError(f"conv2d needs an input and weight of the same rank >= 3 (N, C, spatial...), "
                                               f"got {self.shape} and {weight.shape}")
        n, cin = self.shape[:2]
        cout, cin_g, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
        groups = tensor_args.as_int(groups, "conv2d groups")
        if groups < 1 or cin != cin_g * groups or cout % groups:
            raise tensor_args.WindowShapeError(f"conv2d: input {self.shape} does not match weight {weight.shape} "
                                               f"with groups={groups}")
        x = self.pad(((0, 0), (0, 0)) + tensor_args.conv_pads(padding, nd))
        if any(xs < k for xs, k in zip(x.shape[2:], kernel)):
            raise tensor_args.WindowShapeError(f"conv2d: kernel {kernel} is larger than the padded input {x.shape[2:]}")
        strides, dilations = tensor_args.per_axis(stride, nd, "stride"), tensor_args.per_axis(dilation, nd, "dilation")
        if min(strides) < 1 or min(dilations) < 1:
            raise ValueError(f"conv2d stride and dilation must be >= 1, got {stride} and {dilation}")
        if any(xs < d * (k - 1) + 1 for xs, k, d in zip(x.shape[2:], kernel, dilations)):
            raise tensor_args.WindowShapeError(f"conv2d: dilated kernel {kernel} (dilation {dilations}) is larger than the "
                                               f"padded input {x.shape[2:]}")
        x = x._pool(kernel, strides, dilations)  # (n, cin, *out, *kernel)
        out = tuple(x.shape[2:2 + nd])
        x = x.reshape((n, groups, 1, cin_g) + out + kernel)
        w = weight.reshape((1, groups, cout // groups, cin_g) + (1,) * nd + kernel)
        if dtype is not None:
            x, w = x.cast(dtype), w.cast(dtype)
        red = (3,) + tuple(range(4 + nd, 4 + 2 * nd))
        res = (x * w).sum(red, dtype=dtype).reshape((n, cout) + out)
        return res if bias is None else res + bias.reshape((1, cout) + (1,) * nd)

    # ------------------------------------------------------------------ realization

    def realize(self, *lst: Tensor) -> Tensor:
        """Compute self (and `lst`) into buffers; `Tensor.realize(a, b)` works too."""
        _realize_module().realize(self, *lst)
        return self

    def schedule(self, *lst: Tensor) -> Any:
        """The kernels that would realize self (and `lst`), without running them."""
        return _realize_module().schedule(self, *lst)

    def numpy(self) -> np.ndarray:
        return _realize_module().to_numpy(self)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def data(self) -> memoryview:
        """The values as a memoryview with the tensor's shape and element format (tinygrad's `data()`)."""
        return memoryview(np.require(self.numpy(), None, "C"))

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ValueError(f"item() needs one element, the shape is {self.shape}")
        return self.numpy().reshape(-1)[0].item()

    def lazy_numpy(self) -> np.ndarray:
        """The value computed directly from the graph by numpy (runtime/interpret/lazy_eval.py), no scheduling."""
        from rulec.runtime.interpret.lazy_eval import evaluate

        return evaluate(self.uop)

    def contiguous(self) -> Tensor:
        """Self in a contiguous buffer. A realized buffer, or a view of one contiguous part of it (a reshape,
        a row, a prefix), already is one: as in tinygrad 0.14 it is returned as it is, sharing the storage
        (an assign through it writes the buffer), and so is a copy to another device. Anything else gets a
        buffer of its own; its node carries a unique id, so two `contiguous()` of one computed value are two
        buffers."""
        # no device: a value computed where it is read; a copy between devices is a buffer of its own already
        if _contiguous_view(self.uop) or _contiguous_multi_view(self.uop) or self.device is None \
                or self.uop.op is Ops.COPY:
            return _weakened(Tensor(self.uop), _is_weak(self))
        return _weakened(own_buffer(self), _is_weak(self))  # contiguous keeps a weak value weak (tinygrad's)

    def assign(self, x: Any) -> Tensor:
        """Make self's buffer take the value `x` when realized: self.uop becomes ASSIGN(self.uop, x). A value
        of another shape is broadcast to self's (numpy's rules; an error where they don't allow it)."""
        if not isinstance(x, Tensor):
            x = Tensor.full(self.shape, x, self.dtype) if isinstance(x, (bool, int, float)) else Tensor(x, dtype=self.dtype)
        if isinstance(self.device, tuple) and isinstance(x.device, str):
            x = _multi_module().like(x, self)  # a plain value is laid out as the multi-device target
        if x.shape != self.shape:  # broadcast to the target (as tinygrad 0.14), never shrunk or reduced
            try:
                x = x._broadcast_to(self.shape)
            except ValueError:
                raise ValueError(f"cannot assign a tensor of shape {x.shape} to one of shape {self.shape}") from None
        if _is_weak(x) and _kind(x.dtype) <= _kind(self.dtype):
            x = _commit_weak(x, self.dtype)  # a weak value takes the target's dtype, as a Python scalar would
        if x.dtype != self.dtype:
            raise ValueError(f"cannot assign a {x.dtype.name} tensor to a {self.dtype.name} tensor")
        self._weak = False  # an assign stores the value: the target is a buffer of its dtype from now on
        _same_device((self, x))
        base, chain = _view_of_storage(self.uop)
        if base is None and (own := _view_of_own_buffer(self.uop)) is not None:
            _assign_into_pending_buffer(*own, x.uop)
            return self
        if base is None and not isinstance(self.device, tuple):
            # no storage: each tensor this view was made from becomes its value with the view's part replaced
            # (numpy's result; tinygrad 0.14 gives it where that tensor has a buffer, else drops the write)
            for src, merged in _views_of_computed(self, x.uop):
                src.uop = merged
        # (a detached tensor reads the same storage: an assign to it writes that storage, for every reader)
        if base is None or not (chain or self.uop.op is Ops.DETACH):
            a = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
            if a._mask & MULTI_MASK:
                layout(a)  # the value must be laid out as the target
            self.uop = a
            return self
        # an assign to a view writes the tensor it views: as tinygrad 0.14, every live tensor that reads
        # the viewed storage reads it after the assign from now on (the base too, realized or not). Assigns
        # made before keep the values they were given (numpy's order): they are not looked into.
        after = UOp(Ops.ASSIGN, base.dtype, (base, _value_in_base(base, chain, x.uop)))
        for t in list(all_tensors):
            t.uop = _replace_outside_assigns(t.uop, base, after)
        return self

    def replace(self, x: Tensor) -> Tensor:
        """Make this tensor object stand for `x` from now on (as tinygrad 0.14): same shape, while dtype and
        device may differ. Unlike assign nothing is written: other tensors that read self's old value keep it."""
        if not isinstance(x, Tensor):
            raise TypeError(f"replace() takes a Tensor, not {type(x).__name__}")
        if x.shape != self.shape:
            raise ValueError(f"replace() needs the same shape: {self.shape} and {x.shape}")
        self.uop, self._weak = x.uop, _is_weak(x)
        # what self was a view of, or realized from, is x's now (assign and gradients follow these)
        self._made_from, self._realized_from = getattr(x, "_made_from", None), getattr(x, "_realized_from", None)
        return self


# ---------------------------------------------------------------------------------------- helpers

def _device(device: str | None) -> str:
    """A device argument, canonical ("cl" is "CL"); None is Device.DEFAULT."""
    return Device.canonicalize(device)


def _on(device: str | None) -> tuple[UOp, ...]:
    """The sources that place a constant on `device` (none: a constant with no device)."""
    return () if device is None else (UOp(Ops.DEVICE, arg=_device(device)),)


def _same_device(items: tuple) -> None:
    """Tensors combined by one op live on one device (tinygrad's rule); a Python scalar has none."""
    devs = {t.device for t in items if isinstance(t, Tensor)} - {None}
    # (multi-device operands: the new node's layout check names the op, the shapes and the axes)
    if len(devs) > 1 and not any(isinstance(d, tuple) for d in devs):
        shapes = ", ".join(f"{t.device} {t.shape}" for t in items if isinstance(t, Tensor) and t.device)
        raise ValueError(f"tensors on different devices ({shapes}): move one with .to(device) first")


def _nested_list(v: Any) -> Any:
    """Tuples (at any depth) as lists: an index tuple inside an index selects like a list."""
    return [_nested_list(x) for x in v] if isinstance(v, (tuple, list)) else v


def _check_tensors(name: str, args: tuple) -> None:
    for i, t in enumerate(args):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} takes Tensors; argument {i + 1} is {type(t).__name__}")


def _committed_index(u: UOp) -> UOp:
    """`Tensor(v * 4)`: an expression of bound variables is stored in a concrete integer dtype chosen by
    its bounds, as tinygrad commits its weak int: int32 where they fit. Past int32 (a kernel takes 32-bit
    variables) it keeps the index dtype: a bare variable is then read without a kernel, and an expression
    of one raises naming the value that does not fit."""
    if u.dtype != dtypes.index or u.op is Ops.CONST or u.shape not in ((), None):
        return u
    fits32 = dtypes.int32.min <= u.vmin and u.vmax <= dtypes.int32.max
    return UOp(Ops.CAST, dtypes.int32, (u,)) if fits32 else u


def _split_pads(pads: tuple) -> tuple[tuple, tuple]:
    """((crop before, crop after), ...) from the negative int amounts, and ((grow before, grow after), ...)
    from the positive ones; a symbolic amount (>= 0 for every binding) always grows."""
    crop = tuple(tuple(-v if isinstance(v, int) and v < 0 else 0 for v in pair) for pair in pads)
    grow = tuple(tuple(v if isinstance(v, UOp) or v > 0 else 0 for v in pair) for pair in pads)
    return crop, grow


def _along(x: Tensor, axis: int, lo: int, hi: int, repeat: int = 1) -> Tensor:
    """x[..., lo:hi, ...] on `axis`; a slice of length 1 can be repeated `repeat` times."""
    part = x.shrink(tuple((lo, hi) if i == axis else None for i in range(x.ndim)))
    return part if repeat == 1 else part.expand(tuple(repeat if i == axis else s for i, s in enumerate(part.shape)))


def _place_hits(t: Tensor, positions: Tensor, rest_shape: tuple[int, ...], bshape: tuple[int, ...], j: int,
                k: int) -> Tensor:
    """Where index `t` (of shape `bshape`, broadcast over the other axes' `rest_shape`) names each of
    `positions`, laid along the j-th of k indexed axes."""
    nr, nb = len(rest_shape), len(bshape)
    t = t.reshape((1,) * nr + bshape + (1,) * k).expand(rest_shape + bshape + (1,) * k)
    return t == positions.reshape((1,) * (nr + nb) + tuple(positions.shape[0] if i == j else 1 for i in range(k)))


def _advanced_order(kept: list[Any], axes: list[int], items: list[Any], nr: int, nb: int) -> list[int]:
    """The permutation from (other axes..., index shape...) to numpy's placement: the index axes go where
    the first index was when the indices (and ints) are adjacent, else in front."""
    where = [i for i, it in enumerate(k_ for k_ in items if k_ is not None) if not isinstance(it, slice)]
    if where and where == list(range(where[0], where[-1] + 1)):
        first = sum(1 for it in kept[:axes[0]] if it is None or isinstance(it, slice))
        return list(range(first)) + list(range(nr, nr + nb)) + list(range(first, nr))
    return list(range(nr, nr + nb)) + list(range(nr))


def _unstride(t: Tensor, bounds: list[tuple[int, int]], steps: list[int], shape: tuple[int, ...],
              flips: list[bool]) -> Tensor:
    """The inverse of `flip` + `_strided_shrink`: element j of axis i goes to bounds[i][0] + j*steps[i]
    (in the flipped axis), zeros (False) elsewhere."""
    if any(st > 1 for st in steps):
        ns = t.shape
        t = t.reshape(_flat((n, 1) for n in ns)).pad(_flat(((0, 0), (0, st - 1)) for st in steps))
        t = t.reshape(tuple(n * st for n, st in zip(ns, steps)))
        t = t.shrink(tuple((0, min(n * st, size - b)) for n, st, size, (b, _) in zip(ns, steps, shape, bounds)))
    # a symbolic place (`x[v] = value`) pads by symbolic amounts, >= 0 for every binding (the index checks)
    t = t.pad(tuple((b, size_sum(size, (b, -1), (n, -1))) for n, size, (b, _) in zip(t.shape, shape, bounds)))
    return t.flip([i for i, f in enumerate(flips) if f]) if any(flips) else t


def _is_variable(k: Any) -> bool:
    """A bound (or unbound) symbolic variable, `Variable("i", 0, 9).bind(3)`, used as an integer index."""
    return isinstance(k, UOp) and k.op in (Ops.BIND, Ops.DEFINE_VAR) and k.dtype.is_int


def _index_tensor(k: Any, size: int) -> Tensor:
    """An index tensor / list / array as an integer Tensor (bool masks would give data-dependent shapes)."""
    return tensor_args.int_index(Tensor, k, "an index tensor, list or array")


def _int_pow(t: Tensor, x: Tensor | Scalar, reverse: bool) -> Tensor:
    """An integer power by repeated squaring, wrapping as numpy does (a C backend's float pow would lose
    the low bits, or overflow, past 2**24)."""
    if not reverse and type(x) is int:
        if x < 0:
            raise tensor_args.BadArgError(f"Tensor.pow: an integer tensor ({t.dtype.name}, shape {t.shape}) to a negative "
                             f"integer power ({x}) is not an integer; cast the tensor to a float first")
        base, n = Tensor._operands(t, 1)[0], x  # the exponent as given, not wrapped to the dtype
        out = None
        while n:
            if n & 1:
                out = base if out is None else out * base
            n >>= 1
            if n:
                base = base * base
        return out if out is not None else base.ones_like()
    base, exp = Tensor._operands(x, t) if reverse else Tensor._operands(t, x)
    out, e, b = _weak(1, base.dtype)._broadcast_to(base.shape), exp, base
    for _ in range(8 * exp.dtype.itemsize):  # every bit of the exponent
        out = e._binary(Ops.AND, 1).cast(dtypes.bool).where(out * b, out)
        b, e = b * b, e._binary(Ops.SHR, 1)
    if exp.dtype.kind == "int":  # a negative power: the real power truncated (1, -1, or 0)
        odd = exp._binary(Ops.AND, 1).cast(dtypes.bool)
        neg = (base == 1).where(1, (base == -1).where(odd.where(-1, 1), 0)).cast(base.dtype)
        out = (exp < 0).where(neg, out)
    return out


def _weak(value: Scalar, dtype: DType) -> Tensor:
    """A constant with no device: a Python scalar inside an op, which takes its partner's device (and is
    weak, as the scalar is)."""
    return _weakened(Tensor(_const(dtype, value)), True)


def _const(dtype: DType, value: Scalar, src: tuple[UOp, ...] = ()) -> UOp:
    """A CONST whose value fits its dtype (an integer wraps: tensor_args.const_value), so that every
    evaluator and every rule reading its bounds agrees on it."""
    return UOp.const(dtype, tensor_args.const_value(value, dtype), src)




def _operand(x: Any) -> Tensor | Scalar:
    """A Tensor, or a Python scalar (numpy scalars become weak Python scalars too)."""
    if isinstance(x, (Tensor, bool, int, float)):
        return x
    if isinstance(x, np.generic):
        return x.item()
    return Tensor(x)


def _replace_outside_assigns(root: UOp, old: UOp, new: UOp) -> UOp:
    """`root` with `old` replaced by `new`, except inside ASSIGN nodes (other than `old` itself)."""
    if not root.reaches(old):  # a lookup in cached parents: most live tensors don't read `old` at all
        return root
    nodes = root.toposort(gate=lambda u: u is not old and u.op is not Ops.ASSIGN)
    if old not in nodes:
        return root
    done: dict[UOp, UOp] = {old: new}
    for u in nodes:
        if u in done or u.op is Ops.ASSIGN:
            continue
        src = tuple(done.get(x, x) for x in u.src)
        if src != u.src:
            done[u] = u.replace(src=src)
    return done.get(root, root)


def _view_of_storage(u: UOp) -> tuple[UOp | None, list[UOp]]:
    """The storage a view reads (a realized `BUFFER.reshape`, a bare BUFFER or a pending ASSIGN to one)
    and the movement ops over it, outermost first; (None, []) when `u` is a computed value. A DETACH
    reads the same storage (it only stops gradients): it is no step of the chain."""
    chain: list[UOp] = []
    while not (u.op in (Ops.BUFFER, Ops.ASSIGN) or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)):
        if u.op is Ops.DETACH:
            u = u.src[0]
            continue
        # a bitcast (dtypes of one size) reads the same bytes: a view that an assign writes through
        if u.op not in _MOVEMENT and u.op is not Ops.BITCAST:
            return None, []
        # a reshape to the shape it already has views nothing: the tensor is its source (an assign to it
        # is an ordinary assign, not an assign through a view that other readers would see)
        if not (u.op is Ops.RESHAPE and tuple(u.arg) == tuple(u.src[0].shape)):
            chain.append(u)
        u = u.src[0]
    return u, chain


def _view_of_own_buffer(u: UOp) -> tuple[UOp, list[UOp]] | None:
    """A view (movement ops, bitcasts, detaches) of a pending `contiguous()` that has a buffer of its own
    (a CONTIGUOUS with a unique id, not yet realized): that node and the chain over it, outermost first.
    None for anything else, a bare one included (an assign to all of it is an ordinary assign)."""
    chain: list[UOp] = []
    while u.op in _MOVEMENT or u.op in (Ops.BITCAST, Ops.DETACH):
        if u.op is not Ops.DETACH and not (u.op is Ops.RESHAPE and tuple(u.arg) == tuple(u.src[0].shape)):
            chain.append(u)
        u = u.src[0]
    return (u, chain) if chain and u.op is Ops.CONTIGUOUS and u.arg is not None else None


def _views_of_computed(t: Tensor, value: UOp) -> list[tuple[Tensor, UOp]]:
    """For an assign of `value` to a view with no storage below: each tensor it was made from, nearest
    first, with its value after the write (its own value, the view's part replaced). The walk stops at a
    tensor that was changed since (realized, assigned), at one on several devices, and below an expand
    (one element of the tensor under it is several of the view's: that tensor keeps its value)."""
    out: list[tuple[Tensor, UOp]] = []
    chain: list[UOp] = []
    cur = t
    while (src := getattr(cur, "_made_from", None)) is not None and not isinstance(src.device, tuple):
        u = cur.uop
        while u is not src.uop and (u.op in _MOVEMENT or u.op in (Ops.BITCAST, Ops.DETACH)):
            if u.op is not Ops.DETACH and not (u.op is Ops.RESHAPE and tuple(u.arg) == tuple(u.src[0].shape)):
                chain.append(u)
            u = u.src[0]
        if u is not src.uop or any(op.op is Ops.EXPAND and tuple(op.shape) != tuple(op.src[0].shape) for op in chain):
            break
        if chain:
            out.append((src, _value_in_base(src.uop, chain, value)))
        cur = src
    return out


def _assign_into_pending_buffer(own: UOp, chain: list[UOp], value: UOp) -> None:
    """An assign to a view of a pending own buffer: the buffer is to hold its value with the view's part
    replaced, so every live tensor that reads it reads a new own buffer of that merged value (one
    kernel; a value that reads the old contents keeps the old one as a buffer of its own)."""
    merged = _value_in_base(own.src[0], chain, value)
    new = UOp(Ops.CONTIGUOUS, own.dtype, (merged,), buffers.unique_id())
    for t in list(all_tensors):
        t.uop = _replace_outside_assigns(t.uop, own, new)


def own_buffer(t: Tensor) -> Tensor:
    """`t` stored in a buffer of its own: a CONTIGUOUS with a unique id (nodes are hash-consed, so two such
    of one value are still two buffers), even where `t` is a contiguous view that `contiguous()` shares."""
    return Tensor(UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,), buffers.unique_id()))


def _contiguous_view(u: UOp) -> bool:
    """Whether `u` reads one contiguous run of a realized buffer, in order: the buffer under reshapes and
    shrinks that keep, at each step, whole trailing axes below one partly kept axis and single leading
    indices above it."""
    base, chain = _view_of_storage(u)
    if base is None or base.op is Ops.ASSIGN:
        return False
    for op in reversed(chain):
        if op.op is Ops.SHRINK:
            shape = op.src[0].shape
            if not all(isinstance(v, int) for v in (*shape, *(x for be in op.arg for x in be))):
                return False
            kept = [e - b for b, e in op.arg]
            partial = [i for i, (n, (b, e)) in enumerate(zip(shape, op.arg)) if (b, e) != (0, n)]
            if partial and not all(k == 1 for k in kept[:partial[-1]]):
                return False
        elif op.op is not Ops.RESHAPE:
            return False
    return True


def _contiguous_multi_view(u: UOp) -> bool:
    """Whether `u` is a view of realized multi-device storage (each part a buffer) that reads one contiguous
    run of each part's buffer: the same movement ops on one part (with each part's arguments) are a
    contiguous view. A view that changes the layout (a shrink across the shard axis) is not."""
    chain: list[UOp] = []
    while u.op in (Ops.RESHAPE, Ops.SHRINK):
        chain.append(u)
        u = u.src[0]
    if not chain or u.op is not Ops.MULTI:
        return False
    stored = [p.src[0] if p.op is Ops.RESHAPE else p for p in u.src[0].src]
    if any(p.op is not Ops.BUFFER for p in stored):
        return False
    part = u.src[0].src[0]
    for op in reversed(chain):
        src_lay, lay = layout(op.src[0]), layout(op)
        if src_lay is None or lay is None or (src_lay.axis is not None and lay.axis is None):
            return False
        part = UOp(op.op, part.dtype, (part,), part_arg(op, src_lay))
    return _contiguous_view(part)


# tensor-index writes up to this many are folded with wheres, more with reductions (`_advanced_scatter`)
_UNROLLED_WRITES = 16

_MOVEMENT = {Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}


def _value_in_base(base: UOp, chain: list[UOp], value: UOp) -> UOp:
    """The whole of `base` after the view `chain` (outermost first) of it takes `value`: the value moved
    back through the inverse of each movement op, and the old contents where the view does not reach.
    A view through a real expand (one stored element read at several places) has no inverse: numpy
    refuses such writes, and so does this (ValueError); what a view writes into padding is dropped."""
    mask: UOp | None = None  # where the view reaches; None: everywhere, each element once
    for op in chain:
        below = tuple(op.src[0].shape)
        if op.op is Ops.BITCAST:  # the bits go back in the stored dtype; the mask is not a value
            value = UOp(Ops.BITCAST, op.src[0].dtype, (value,))
            continue
        if op.op is Ops.EXPAND and tuple(op.shape) == below:
            continue
        if op.op is Ops.EXPAND:
            raise ValueError(f"cannot assign to an expanded view (shape {below} expanded to {tuple(op.shape)}): "
                             f"several of its elements are one stored element; assign to a contiguous() copy")
        if op.op is Ops.SHRINK:
            if mask is None:
                true = UOp(Ops.RESHAPE, dtypes.bool, (UOp.const(dtypes.bool, True),), (1,) * len(op.shape))
                mask = UOp(Ops.EXPAND, dtypes.bool, (true,), tuple(op.shape))
            inverse: tuple[Ops, Any] = (Ops.PAD, tuple((s, n - e) for (s, e), n in zip(op.arg, below)))
        elif op.op is Ops.PERMUTE:
            inverse = (Ops.PERMUTE, tuple(sorted(range(len(op.arg)), key=op.arg.__getitem__)))
        elif op.op in (Ops.FLIP, Ops.RESHAPE):
            inverse = (op.op, op.arg if op.op is Ops.FLIP else below)
        else:  # PAD (a strided slice pads up to a multiple of its step): padding is no storage
            inverse = (Ops.SHRINK, tuple((b, b + n) for (b, _), n in zip(op.arg, below)))
        value = UOp(inverse[0], value.dtype, (value,), inverse[1])
        mask = None if mask is None else UOp(inverse[0], mask.dtype, (mask,), inverse[1])
    return value if mask is None else UOp(Ops.WHERE, value.dtype, (mask, value, base))


def _reshape_buffer(buf: UOp, shape: tuple[int, ...]) -> UOp:
    # always built, even as a no-op: a realized tensor is BUFFER + RESHAPE (docs/tensor-ir.md)
    return UOp(Ops.RESHAPE, buf.dtype, (buf,), tuple(shape))


def _file_contents(path: Path, dtype: DType, device: str) -> UOp:
    """A file's bytes as one buffer of `dtype`; a tail shorter than one element is left out."""
    raw = np.fromfile(path, np.uint8)
    uop = _buffer_view(raw, dtypes.uint8, device)
    if dtype == dtypes.uint8:
        return uop
    return Tensor(uop)[:len(raw) - len(raw) % dtype.itemsize].bitcast(dtype).uop


def _buffer_view(arr: np.ndarray, dtype: DType, device: str) -> UOp:
    if dtype == dtypes.bfloat16:  # host data made bfloat16 holds bfloat16 values, as a kernel's results do
        with np.errstate(over="ignore", invalid="ignore"):
            arr = buffers.round_to_bfloat16(np.asarray(arr, np.float32))
    return _reshape_buffer(buffers.from_numpy(arr, dtype, device), arr.shape)
