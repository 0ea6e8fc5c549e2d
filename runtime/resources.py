"""Where the shipped data files (the op table, the rule files) live."""
from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path


@cache
def rules_dir() -> Path:
    """The `rules/` folder, installed as the data-only package `rulec.rules`."""
    spec = importlib.util.find_spec("rulec.rules")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("rulec is not installed correctly: the rulec.rules data package is missing")
    return Path(list(spec.submodule_search_locations)[0])
