"""`rulec.compat`: run scripts written for other frameworks on rulec, unchanged.

`install()` serves the `tinygrad` namespace from rulec (rulec/compat/tinygrad.py): while it is
installed, `from tinygrad import Tensor, nn` gives rulec's Tensor and rulec.nn. `uninstall()` takes the
layer away and puts back whatever `tinygrad` modules were imported before (the real tinygrad, say).
Both are idempotent. `rulec run SCRIPT.py` installs the layer for the script's run (`--no-tinygrad`
leaves it out); `python -m rulec.compat SCRIPT.py ARGS...` runs a script with it, without the CLI.
See docs/tinygrad.md for what is mapped.
"""
from __future__ import annotations

import contextlib
import sys
import types
from typing import Iterator

from rulec.compat.tinygrad import MODULES, ROOT, NotProvidedByRulec, TinygradFinder, is_compat_module

__all__ = ["install", "uninstall", "installed", "tinygrad_layer", "NotProvidedByRulec", "MODULES"]

_finder: TinygradFinder | None = None
_saved: dict[str, types.ModuleType] = {}  # tinygrad modules that were in sys.modules before install()


def _tinygrad_entries() -> list[str]:
    return [n for n in sys.modules if n == ROOT or n.startswith(ROOT + ".")]


def installed() -> bool:
    return _finder is not None


def install() -> None:
    """Serve `tinygrad` from rulec from now on. Already imported tinygrad modules are set aside (and
    come back with uninstall()), so that even a process that imported the real tinygrad gets rulec's."""
    global _finder
    if _finder is not None:
        return
    for name in _tinygrad_entries():
        module = sys.modules.pop(name)
        if not is_compat_module(module):
            _saved[name] = module
    _finder = TinygradFinder()
    sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Stop serving `tinygrad`: drop the layer's modules and put back those install() set aside."""
    global _finder
    if _finder is None:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if f is not _finder]
    _finder = None
    for name in _tinygrad_entries():
        if is_compat_module(sys.modules[name]):
            del sys.modules[name]
    sys.modules.update(_saved)
    _saved.clear()


@contextlib.contextmanager
def tinygrad_layer(enabled: bool = True) -> Iterator[None]:
    """The layer installed for a block (left as it was when `enabled` is False or it was installed)."""
    if not enabled or installed():
        yield
        return
    install()
    try:
        yield
    finally:
        uninstall()
