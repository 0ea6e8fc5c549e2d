"""Where the shipped data files (the op table, the rule files) live."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any


@cache
def rules_dir() -> Path:
    """The `rules/` folder, installed as the data-only package `rulec.rules`.

    The environment variable RULEC_RULES_DIR, when set, names another folder of the same shape to use
    instead (`rulec diff` runs each revision of the rules this way). It is read once per process; its
    builds go to the user cache under a key of its absolute path (`default_build_dir`), never into it.
    """
    env = os.environ.get("RULEC_RULES_DIR")
    if env:
        folder = Path(env).resolve()
        if not (folder / "ops.yaml").is_file():
            raise RuntimeError(f"RULEC_RULES_DIR={env}: not a rules folder (no ops.yaml)")
        return folder
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


def data_cache_name(path: Path, text: bytes) -> str:
    """The name of the JSON copy of the YAML data file `path` with contents `text`."""
    return f"{path.stem}-{hashlib.sha256(text).hexdigest()[:32]}.json"


def read_yaml_data(path: Path) -> Any:
    """A YAML data file (a backend's description), parsed once per content: the parsed data is kept as JSON
    named by the file's hash (in a wheel's prebuilt folder, or the user cache), so a program runs without a
    YAML parser until the file is edited."""
    text = path.read_bytes()
    digest, name = hashlib.sha256(text).hexdigest(), data_cache_name(path, text)
    cached = cache_root() / "data" / name
    for p in (prebuilt_dir() / name, cached):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("source_sha256") == digest:
                return data["data"]
        except (OSError, ValueError):
            pass
    import yaml

    data = yaml.safe_load(text)
    write_yaml_data_cache(cached, digest, data)
    return data


def write_yaml_data_cache(path: Path, digest: str, data: Any) -> None:
    """Best effort, atomically; an unwritable cache only costs a parse."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".rulec-tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"source_sha256": digest, "data": data}, f)
        os.replace(tmp, path)
    except OSError:
        pass
