"""rulec: a declarative rule-DSL compiler toolkit for tensor compilers."""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load"]


def load(name_or_path, **kwargs):
    """Load a compiled rule set; see rulec.loader.load."""
    from .loader import load as _load

    return _load(name_or_path, **kwargs)
