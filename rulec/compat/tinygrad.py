"""The `tinygrad` import layer: while installed, `import tinygrad` (and its submodules that rulec maps)
give modules whose names are rulec's own objects, so a script written for tinygrad 0.14 runs on rulec
as written.

Each mapped tinygrad module is a fresh module object (never a rulec module renamed), filled from a table:
`tinygrad.Tensor is rulec.Tensor`, `tinygrad.nn.optim.Adam is rulec.nn.optim.Adam`, and so on. A tinygrad
name rulec does not provide, as a module (`import tinygrad.nn.datasets`) or as a name
(`from tinygrad.helpers import fetch`), raises `NotProvidedByRulec`, an ImportError naming it and what
the module does provide. Nothing is stubbed.

Every mapped module is a package (its `__path__` is empty), so that `from tinygrad.X import name` asks
this finder for `tinygrad.X.name` when `name` is missing and the error can say which name that was;
`getattr` and `hasattr` on a missing name give an AttributeError as usual.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Sequence

ROOT = "tinygrad"


@dataclass(frozen=True)
class Mapping:
    """One tinygrad module: its names (tinygrad name -> "rulec.module:attr"), the `__all__` of rulec
    modules whose public names it re-exports, and its submodules."""

    names: dict[str, str] = field(default_factory=dict)
    all_of: tuple[str, ...] = ()
    submodules: tuple[str, ...] = ()


_TENSOR_AND_DTYPES = {"Tensor": "rulec.runtime.tensor.tensor:Tensor", "dtypes": "rulec.runtime.ir.dtype:dtypes"}

# what rulec serves for each tinygrad 0.14 module that scripts import; anything else is not provided
MODULES: dict[str, Mapping] = {
    "tinygrad": Mapping(
        names={"Tensor": "rulec.runtime.tensor.tensor:Tensor", "TinyJit": "rulec.jit:TinyJit",
               "dtypes": "rulec.runtime.ir.dtype:dtypes", "Device": "rulec.runtime.device:Device",
               "Context": "rulec.helpers:Context", "getenv": "rulec.helpers:getenv",
               "GlobalCounters": "rulec.helpers:GlobalCounters", "UOp": "rulec.runtime.ir.uop:UOp",
               "Variable": "rulec.runtime.ir.uop:UOp.variable"},
        submodules=("tensor", "nn", "helpers", "dtype", "device", "engine")),
    # the names beside Tensor are those tinygrad's own modules import and scripts take from there
    "tinygrad.tensor": Mapping(names={**_TENSOR_AND_DTYPES, "DType": "rulec.runtime.ir.dtype:DType",
                                      "UOp": "rulec.runtime.ir.uop:UOp", "Variable": "rulec.runtime.ir.uop:UOp.variable"}),
    "tinygrad.nn": Mapping(names=_TENSOR_AND_DTYPES, all_of=("rulec.nn",), submodules=("optim", "state", "datasets")),
    "tinygrad.nn.optim": Mapping(names=_TENSOR_AND_DTYPES, all_of=("rulec.nn.optim",)),
    "tinygrad.nn.state": Mapping(names=_TENSOR_AND_DTYPES, all_of=("rulec.nn.state",)),
    "tinygrad.nn.datasets": Mapping(names={"Tensor": "rulec.runtime.tensor.tensor:Tensor"}, all_of=("rulec.nn.datasets",)),
    "tinygrad.helpers": Mapping(all_of=("rulec.helpers",)),
    "tinygrad.dtype": Mapping(names={"dtypes": "rulec.runtime.ir.dtype:dtypes", "DType": "rulec.runtime.ir.dtype:DType",
                                     "PtrDType": "rulec.runtime.ir.dtype:PtrDType",
                                     "Invalid": "rulec.runtime.ir.dtype:Invalid",
                                     "InvalidType": "rulec.runtime.ir.dtype:InvalidType",
                                     "to_dtype": "rulec.runtime.tensor.tensor_args:to_dtype"}),
    "tinygrad.device": Mapping(names={"Device": "rulec.runtime.device:Device"}),
    "tinygrad.engine": Mapping(submodules=("jit",)),
    "tinygrad.engine.jit": Mapping(names={"TinyJit": "rulec.jit:TinyJit", "JitError": "rulec.jit:JitError"}),
}


class NotProvidedByRulec(ModuleNotFoundError):
    """A tinygrad module or name that rulec's compatibility layer does not serve.

    A ModuleNotFoundError without `name`, so that `from tinygrad.X import missing` reports this error
    rather than Python's generic "cannot import name"."""

    def __init__(self, tinygrad_name: str):
        self.tinygrad_name = tinygrad_name
        super().__init__(_not_provided_message(tinygrad_name))


def _not_provided_message(full: str) -> str:
    parent = next((m for m in sorted(MODULES, key=len, reverse=True) if full.startswith(m + ".")), None)
    msg = f"{full} is not provided by rulec (rulec.compat serves only the tinygrad names rulec implements)"
    if parent is not None:
        msg += f"; {parent} provides {', '.join(provided_names(parent))}"
    return msg + " (docs/tinygrad.md)"


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return functools.reduce(getattr, attr.split("."), importlib.import_module(module))  # "UOp.variable" too


def provided_names(name: str) -> list[str]:
    """The public names the mapped tinygrad module `name` provides, submodules included, sorted."""
    m = MODULES[name]
    names = set(m.names) | set(m.submodules)
    for source in m.all_of:
        names |= set(importlib.import_module(source).__all__)
    return sorted(names)


def _fill(module: types.ModuleType, mapping: Mapping) -> None:
    for source in mapping.all_of:
        src = importlib.import_module(source)
        for n in src.__all__:
            setattr(module, n, getattr(src, n))
    for n, target in mapping.names.items():
        setattr(module, n, _resolve(target))
    module.__all__ = sorted(set(provided_names(module.__name__)) - set(mapping.submodules))


def _module_getattr(fullname: str, submodules: Sequence[str]) -> Any:
    def __getattr__(attr: str) -> Any:
        if attr in submodules:  # `import tinygrad; tinygrad.nn.optim.Adam` works as in tinygrad
            return importlib.import_module(f"{fullname}.{attr}")
        if attr.startswith("__"):
            raise AttributeError(f"module {fullname!r} has no attribute {attr!r}")
        missing = _not_provided_message(f"{fullname}.{attr}")
        raise AttributeError(f"module {fullname!r} has no attribute {attr!r}: {missing}")

    return __getattr__


class TinygradFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads every `tinygrad` and `tinygrad.*` module from MODULES; refuses any other."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        if fullname not in MODULES:
            raise NotProvidedByRulec(fullname)
        spec = importlib.machinery.ModuleSpec(fullname, self, origin="rulec.compat", is_package=True)
        spec.submodule_search_locations = []
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name, f"tinygrad's {spec.name}, served by rulec (rulec.compat)")

    def exec_module(self, module: types.ModuleType) -> None:
        mapping = MODULES[module.__name__]
        _fill(module, mapping)
        module.__getattr__ = _module_getattr(module.__name__, mapping.submodules)  # type: ignore[attr-defined]
        module.__rulec_compat__ = True  # type: ignore[attr-defined]


def is_compat_module(module: Any) -> bool:
    """Whether `module` is one of this layer's tinygrad modules (not the real tinygrad's)."""
    return getattr(module, "__rulec_compat__", False) is True
