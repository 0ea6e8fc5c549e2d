"""Small run-time support for generated matchers."""
from __future__ import annotations

from typing import Any

from .dtype import DType
from .uop import UOp


def as_node(value: Any, dtype: DType) -> UOp:
    """A rule result: a UOp as is, any other value as a CONST of `dtype`."""
    return value if isinstance(value, UOp) else UOp.const(dtype, value)
