"""rulec: a declarative rule-DSL compiler toolkit for tensor compilers."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load", "Tensor", "dtypes", "Device", "TinyJit"]


def load(name_or_path: Any, name: str | None = None, build_dir: Any = None, rebuild: bool = True) -> Any:
    """Load a compiled rule set; see rulec.runtime.engine.loading.load."""
    from rulec.runtime.engine.loading import load as _load

    return _load(name_or_path, name, build_dir, rebuild)


def _rebuild(sources: list, out_dir: Any, force: bool) -> Any:
    """The runtime's way to the compiler, taken only when a build is stale: the compiler is imported here."""
    from .build import build

    return build(sources, out_dir, force=force)


def _register_rebuilder() -> None:
    from rulec.runtime.engine import artifacts  # stdlib only: importing rulec stays cheap

    artifacts.set_rebuilder(_rebuild)


def __getattr__(name: str) -> Any:
    # the tensor frontend pulls in the whole runtime; import it only when asked for
    if name == "Tensor":
        from rulec.runtime.tensor.tensor import Tensor

        return Tensor
    if name == "Device":
        from rulec.runtime.device import Device

        return Device
    if name == "TinyJit":
        from rulec.jit import TinyJit

        return TinyJit
    if name == "dtypes":
        from rulec.runtime.ir.dtype import dtypes

        return dtypes
    raise AttributeError(f"module 'rulec' has no attribute {name!r}")


_register_rebuilder()
