"""Importing a rule's callback at load time: only a function defined in the module it is named from.

The compiler checks `call:` targets without running anything (`rulec/callback_check.py`); this is the
run-time half, which the generated matchers and the pipeline reader use, so the runtime needs no compiler
module to load them. The module may have changed since the build (it is not a hashed build input), so
the checks are made again here.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Sequence

# Never callbacks: the standard library and builtins (`os:abort`, `builtins:eval`, ...).
REFUSED_MODULES = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {"builtins", "__main__"}


class CallbackImportError(ImportError):
    pass


def is_refused(module: str) -> bool:
    """True for the standard library and builtins: their functions are never callbacks."""
    return module.split(".")[0] in REFUSED_MODULES


def load_defined(module: str, function: str, folders: Sequence[str] = ()) -> Any:
    """Import `module` with `folders` first on the path, and return `function` if it is defined there."""
    if is_refused(module):
        raise CallbackImportError(f"'{module}:{function}' is in Python's standard library: not a callback")
    added = [d for d in folders if d not in sys.path]
    sys.path[:0] = added
    try:
        mod = importlib.import_module(module)
    except (Exception, SystemExit) as e:  # user code failing at import time must become a diagnostic
        raise CallbackImportError(f"cannot import callback module '{module}': {type(e).__name__}: {e}") from None
    finally:
        for d in added:
            sys.path.remove(d)
    fn = getattr(mod, function, None)
    if fn is None:
        raise CallbackImportError(f"module '{module}' has no function '{function}'")
    # a decorated def (functools.cache, ...) keeps its __module__; a builtin or an imported function does not
    if not callable(fn) or getattr(fn, "__module__", None) != mod.__name__:
        where = getattr(fn, "__module__", None)
        detail = f"it comes from '{where}'" if where and where != mod.__name__ else f"it is {type(fn).__name__}"
        raise CallbackImportError(f"'{module}:{function}' is not a function defined in module '{module}' ({detail})")
    return fn
