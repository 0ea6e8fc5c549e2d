"""rulec.load(): a compiled rule set by name or by rule file, from a current build.

Policy: loading never uses a stale or damaged artifact. If a rule file or the code
generators changed since the build, or the manifest is missing or malformed, or an
artifact does not hash to what the manifest recorded (a killed build, a truncated or
edited file), `load` has the compiler rebuild (incrementally; only the affected rule
sets are regenerated). Pass `rebuild=False` to get a StaleBuildError instead. A
generated module is compiled from the very bytes whose hash was checked.
"""
from __future__ import annotations

import os
from pathlib import Path

from rulec.runtime.engine.artifacts import (Build, RuleSetNotFound, StaleBuildError, default_build_dir, default_sources,
                                            use)
from rulec.runtime.engine.ruleset import RuleSet

__all__ = ["load", "RuleSetNotFound", "StaleBuildError"]


def _resolve_sources(name_or_path: str | Path, name: str | None) -> tuple[list[Path], str | None]:
    text = str(name_or_path)
    path_part, _, suffix = text.rpartition(":") if ":" in text and not Path(text).exists() else (text, "", "")
    if not path_part:  # Path("") is the working directory: never load that by accident
        return default_sources(), name or text
    if Path(path_part).exists() and (Path(path_part).is_dir() or path_part.endswith((".yaml", ".yml"))):
        return [Path(path_part)], name or (suffix or None)
    if path_part.endswith((".yaml", ".yml")):  # meant as a file: say so rather than "no rule set named x.yaml"
        raise FileNotFoundError(f"no such rule file: {path_part}")
    return default_sources(), name or text


def _check_arguments(name_or_path: object, name: object, build_dir: object, rebuild: object) -> None:
    """Wrong types fail here, by the argument's name, rather than deep inside as a TypeError or a path."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load(): name_or_path must be a str or a path, not {type(name_or_path).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"load(): name must be a str or None, not {type(name).__name__}")
    if build_dir is not None and not isinstance(build_dir, (str, os.PathLike)):
        raise TypeError(f"load(): build_dir must be a str, a path or None, not {type(build_dir).__name__}")
    if build_dir is not None and not str(build_dir).strip():
        raise ValueError("load(): build_dir is an empty string (pass None for the default cache folder)")
    if not isinstance(rebuild, bool):
        raise TypeError(f"load(): rebuild must be True or False, not {type(rebuild).__name__}")


def _pick_name(sets: dict, source: Path, name: str | None) -> str:
    if name is None:
        own = [n for n, e in sets.items() if Path(e["file"]).resolve() == source.resolve()]
        if len(own) != 1:
            raise RuleSetNotFound(f"{source} defines {len(own)} rule sets ({', '.join(own)}); "
                                  f"pick one with '{source}:NAME'")
        return own[0]
    if name not in sets:
        import difflib

        close = difflib.get_close_matches(name, list(sets), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(sets))}"
        raise RuleSetNotFound(f"no rule set named '{name}'{hint}")
    return name


def load(name_or_path: str | Path, name: str | None = None, build_dir: str | Path | None = None,
         rebuild: bool = True) -> RuleSet:
    """Load a rule set.

    `name_or_path` is a rule-set name from rulec's own rules/ folder ("symbolic"),
    or a rule file or folder, optionally suffixed with ":name" to pick one set.
    A file holding a single rule set needs no name. Raises StaleBuildError (with
    rebuild=False) when the build is out of date or damaged, BuildFolderError when
    a rebuild is needed and the build folder can't be written.
    """
    _check_arguments(name_or_path, name, build_dir, rebuild)
    sources, name = _resolve_sources(name_or_path, name)
    out = Path(build_dir) if build_dir is not None else default_build_dir(sources)

    def get(b: Build) -> RuleSet:
        return b.ruleset(_pick_name(b.manifest["rulesets"], sources[0], name))

    return use(sources, out, rebuild, get)

