"""rulec: a declarative rule-DSL compiler toolkit for tensor compilers."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load", "Tensor", "dtypes"]


def load(name_or_path, **kwargs):
    """Load a compiled rule set; see rulec.loader.load."""
    from .loader import load as _load

    return _load(name_or_path, **kwargs)


def __getattr__(name: str) -> Any:
    # the tensor frontend pulls in the whole runtime; import it only when asked for
    if name == "Tensor":
        from .runtime.tensor import Tensor

        return Tensor
    if name == "dtypes":
        from .runtime.dtype import dtypes

        return dtypes
    raise AttributeError(f"module 'rulec' has no attribute {name!r}")
