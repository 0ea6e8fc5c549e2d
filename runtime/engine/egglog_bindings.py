"""egglog's compiled bindings, loaded without the rest of the egglog package.

rulec uses only `egglog.bindings`, the Rust extension (EGraph, parse_program, run_program). Importing it
the usual way first runs `egglog/__init__.py`, which imports egglog's high-level Python API and with it
black, graphviz, cloudpickle and opentelemetry: about 0.25 s, against a few milliseconds for the
extension alone. The extension is a self-contained module, so it is loaded from its file. It is
registered under its own name, so a later `import egglog` reuses it (a PyO3 module may be initialised
only once per process). Where the package is laid out otherwise, the ordinary import is used.
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "egglog.bindings"


@functools.cache
def bindings() -> ModuleType:
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    path = _extension_path()
    if path is None:
        from egglog import bindings as ordinary

        return ordinary
    loader = importlib.machinery.ExtensionFileLoader(NAME, str(path))
    spec = importlib.util.spec_from_file_location(NAME, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[NAME] = module
    return module


def _extension_path() -> Path | None:
    """The file of the bindings extension, found without importing the egglog package."""
    spec = importlib.util.find_spec("egglog")  # a top-level name: nothing is imported to find it
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            candidate = Path(folder) / f"bindings{suffix}"
            if candidate.is_file():
                return candidate
    return None
