"""Where the shipped data files (the op table, the rule files) live."""
from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path


@cache
def rules_dir() -> Path:
    """The `rules/` folder, installed as the data-only package `rulec.rules`."""
    spec = importlib.util.find_spec("rulec.rules")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("rulec is not installed correctly: the rulec.rules data package is missing")
    return Path(list(spec.submodule_search_locations)[0])


def cache_root() -> Path:
    env = os.environ.get("RULEC_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rulec"


def prebuilt_dir() -> Path:
    """The build of rulec's own rules that a wheel ships (`setup.py` makes it); absent in a checkout."""
    import rulec

    return Path(rulec.__file__).parent / "_prebuilt"
