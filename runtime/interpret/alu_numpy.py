"""The ALU ops on numpy arrays: the one table both numpy oracles use (runtime/interpret/interpret.py for kernels,
runtime/interpret/lazy_eval.py for tensor graphs).

The semantics are runtime/ir/alu.py's (the scalar specification); tests/test_alu.py checks every op of
this table against it, dtype by dtype, on edge values. Each function takes arrays already in the dtype
the op computes in; the caller rounds the result to the node's dtype.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rulec.runtime.ir.alu import ALU
from rulec.runtime.ir.ops import Ops


def c_idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b truncated toward zero (C); integer division by zero gives 0."""
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    q = np.floor_divide(a, b)  # 0 where b == 0
    # numpy floors, C truncates: bump the quotient of an inexact division with operands of opposite sign
    return q + ((np.fmod(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)


def _neg(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.negative(x)


def _recip(x: np.ndarray) -> np.ndarray:
    # np.reciprocal of an integer 0 is the most negative integer; alu.py says 0, as for IDIV
    return c_idiv(np.ones_like(x), x) if x.dtype.kind in "iu" else np.reciprocal(x)


def _trunc(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind in "iub" else np.trunc(x)  # numpy < 2.1 makes floats of integer input


_IMPL: dict[Ops, Callable[..., Any]] = {
    Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.true_divide,
    Ops.IDIV: c_idiv, Ops.MOD: np.fmod,  # np.fmod is C's remainder: the sign of the dividend, x % 0 == 0
    Ops.MAX: np.maximum, Ops.POW: np.power, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal,
    Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor,
    # numpy shifts by a negative amount or by the width or more give 0 (-1 for SHR of a negative), as alu.py
    Ops.SHL: np.left_shift, Ops.SHR: np.right_shift,
    Ops.NEG: _neg, Ops.RECIP: _recip, Ops.SQRT: np.sqrt, Ops.EXP2: np.exp2, Ops.LOG2: np.log2,
    Ops.SIN: np.sin, Ops.TRUNC: _trunc,
    Ops.WHERE: np.where, Ops.MULACC: lambda a, b, c: a * b + c,
}

# the ops of alu.ALU, no more and no fewer: a KeyError here is an op whose array form is missing
ARRAY: dict[Ops, Callable[..., Any]] = {op: _IMPL[op] for op in ALU}
if len(ARRAY) != len(_IMPL):
    raise ImportError(f"runtime/interpret/alu_numpy.py: array forms of non-ALU ops "
                      f"{sorted(o.name for o in set(_IMPL) - set(ALU))}")

# REDUCE's ops (their start values are alu.reduce_identity)
REDUCE: dict[Ops, np.ufunc] = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}
