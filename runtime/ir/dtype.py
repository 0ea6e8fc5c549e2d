"""Scalar dtypes and pointer dtypes with an address space."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class DType:
    name: str
    itemsize: int
    kind: str  # "bool" | "int" | "uint" | "float" | "index" | "void"
    priority: int  # for promotion: higher wins within the lattice

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    # Dtypes are interned (one object per dtype; see ptr()), so identity is equality and hashing is
    # by identity, in C: dtypes are hashed on every node creation and every dtype test of a rule.
    __hash__ = object.__hash__
    __eq__ = object.__eq__

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "index")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def scalar(self) -> DType:
        return self

    def ptr(self, size: int = -1, addrspace: AddrSpace | None = None) -> PtrDType:
        key = (self, addrspace or AddrSpace.GLOBAL, size)
        p = _PTRS.get(key)
        if p is None:
            p = _PTRS[key] = PtrDType(self.name, self.itemsize, self.kind, self.priority, *key)
        return p

    @property
    def min(self) -> int | float | bool:
        return _limits(self)[0]

    @property
    def max(self) -> int | float | bool:
        return _limits(self)[1]


class AddrSpace(enum.Enum):
    GLOBAL = "global"
    LOCAL = "local"
    REG = "register"

    def __repr__(self) -> str:
        return f"AddrSpace.{self.name}"


@dataclass(frozen=True, eq=False)
class PtrDType(DType):
    base: DType = None  # type: ignore[assignment]
    addrspace: AddrSpace = AddrSpace.GLOBAL
    size: int = -1

    def __repr__(self) -> str:
        return f"{self.base!r}.ptr({self.size}, {self.addrspace!r})"

    def __reduce__(self):
        return (DType.ptr, (self.base, self.size, self.addrspace))

    @property
    def scalar(self) -> DType:
        return self.base


_PTRS: dict[tuple, PtrDType] = {}


def _by_name(name: str) -> DType:
    return DTYPE_BY_NAME[name]


def _limits(dt: DType) -> tuple:
    if dt.kind == "bool":
        return False, True
    if dt.kind == "int":
        return -(2 ** (8 * dt.itemsize - 1)), 2 ** (8 * dt.itemsize - 1) - 1
    if dt.kind == "uint":
        return 0, 2 ** (8 * dt.itemsize) - 1
    if dt.kind == "index":
        return -(2**63), 2**63 - 1
    return -math.inf, math.inf


class UnknownDTypeError(ValueError, AttributeError):
    """A dtype name that names none: a ValueError, and an AttributeError as tinygrad's `dtypes.<name>` lookup."""


class dtypes:
    """The dtype namespace, as in `dtypes.float32`."""

    bool = DType("bool", 1, "bool", 0)
    int8 = DType("int8", 1, "int", 1)
    uint8 = DType("uint8", 1, "uint", 2)
    int16 = DType("int16", 2, "int", 3)
    uint16 = DType("uint16", 2, "uint", 4)
    int32 = DType("int32", 4, "int", 5)
    uint32 = DType("uint32", 4, "uint", 6)
    int64 = DType("int64", 8, "int", 7)
    uint64 = DType("uint64", 8, "uint", 8)
    float16 = DType("float16", 2, "float", 9)
    bfloat16 = DType("bfloat16", 2, "float", 10)
    float32 = DType("float32", 4, "float", 11)
    float64 = DType("float64", 8, "float", 12)
    # index is the arbitrary-precision integer of index arithmetic; it becomes int32/int64 in codegen
    index = DType("index", 8, "index", 13)
    void = DType("void", 0, "void", -1)

    # aliases
    half = float16
    float = float32
    double = float64
    int = int32
    long = int64
    char, uchar, short, ushort, uint, ulong = int8, uint8, int16, uint16, uint32, uint64

    # what Python floats and ints become; a script may set them, as in tinygrad
    default_float = float32
    default_int = int32

    @staticmethod
    def is_float(dt: DType) -> bool:
        return dt.is_float

    @staticmethod
    def is_int(dt: DType) -> bool:
        return dt.is_int

    @staticmethod
    def is_unsigned(dt: DType) -> bool:
        return dt.is_unsigned

    @staticmethod
    def from_py(x) -> DType:
        """The dtype a Python value (or a nested list of them) becomes."""
        if isinstance(x, (list, tuple)):
            return max((dtypes.from_py(v) for v in x), key=lambda d: d.priority, default=dtypes.default_float)
        return dtypes.bool if isinstance(x, bool) else dtypes.default_int if isinstance(x, int) \
            else dtypes.default_float

    @staticmethod
    def all() -> tuple[DType, ...]:
        return ALL_DTYPES

    @staticmethod
    def from_name(name: str) -> DType:
        try:
            return DTYPE_BY_NAME[name]
        except KeyError:
            raise UnknownDTypeError(f"unknown dtype {name!r}") from None


ALL_DTYPES: tuple[DType, ...] = tuple(v for k, v in vars(dtypes).items() if isinstance(v, DType) and k == v.name)
DTYPE_BY_NAME: dict[str, DType] = {k: v for k, v in vars(dtypes).items()
                                   if isinstance(v, DType) and not k.startswith("default_")}
dtypes.floats = tuple(d for d in ALL_DTYPES if d.kind == "float")  # type: ignore[attr-defined]
dtypes.ints = tuple(d for d in ALL_DTYPES if d.kind in ("int", "uint"))  # type: ignore[attr-defined]


def python_value(dt: DType, v):
    """Normalize a Python constant to the type a CONST of dtype `dt` stores."""
    if dt.kind == "bool":
        return bool(v)
    if dt.kind in ("int", "uint", "index"):
        return int(v)
    if dt.kind == "float":
        return float(v)
    return v


class InvalidType:
    """The type of `Invalid`, a value a program leaves unspecified: `mask.where(x, Invalid)` is x where
    the mask holds and any value elsewhere (tinygrad's `tinygrad.dtype.Invalid`). One instance."""
    _instance: InvalidType | None = None

    def __new__(cls) -> InvalidType:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "Invalid"

    def __reduce__(self) -> tuple:
        return (InvalidType, ())


Invalid = InvalidType()
