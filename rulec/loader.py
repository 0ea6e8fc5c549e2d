"""rulec.load(): find a compiled rule set, rebuilding it first if its sources changed.

Policy: loading never uses a stale or damaged artifact. If a rule file changed
since the build, or the manifest is missing or malformed, or an artifact does not
hash to what the manifest recorded (a killed build, a truncated or edited file),
`load` rebuilds (incrementally; only the affected rule sets are regenerated).
Pass `rebuild=False` to get a StaleBuildError instead. A generated module is
compiled from the very bytes whose hash was checked, never re-read from disk.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

from .build import (build, default_build_dir, default_sources, file_sha256, read_manifest,
                    sha256, source_hashes)
from .ruleset import RuleSet


class StaleBuildError(RuntimeError):
    pass


class RuleSetNotFound(LookupError):
    pass


_modules: dict[tuple[str, str], ModuleType] = {}


def _read_verified(path: Path, expected: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if sha256(data) == expected else None


def _import_artifact(path: Path, code: bytes, digest: str, source_dirs: list[str]) -> ModuleType:
    """Run a generated matcher module from `code`, bytes already checked against the manifest."""
    cache_key = (str(path), digest)
    mod = _modules.get(cache_key)
    if mod is None:
        modname = f"rulec_generated.{path.stem}_{digest[:12]}"
        compiled = compile(code, str(path), "exec", dont_inherit=True)
        mod = ModuleType(modname)
        mod.__file__ = str(path)
        sys.modules[modname] = mod
        # callbacks may live beside their rule files, as the compiler allowed when it checked them
        added = [d for d in source_dirs if d not in sys.path]
        sys.path[:0] = added
        try:
            exec(compiled, mod.__dict__)
        except BaseException:
            del sys.modules[modname]
            raise
        finally:
            for d in added:
                sys.path.remove(d)
        _modules[cache_key] = mod
    return mod


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


def _try_load(out: Path, sources: list[Path], name: str | None) -> tuple[RuleSet | None, str, bool]:
    """The rule set from the build in `out` if that build is current and intact, else (None, why not, and
    whether a rebuild must regenerate artifacts that look current)."""
    manifest = read_manifest(out)
    if manifest is None:
        return None, f"the build in {out} has no valid manifest", False
    if manifest["sources"] != source_hashes(sources):
        return None, f"the build in {out} is out of date with its rule files", False
    picked = _pick_name(manifest["rulesets"], sources[0], name)
    entry = manifest["rulesets"][picked]
    code = _read_verified(out / entry["python"], entry["python_sha256"])
    if code is None or file_sha256(out / entry["egglog"]) != entry["egglog_sha256"]:
        return None, f"an artifact of rule set {picked} in {out} does not match its manifest (sha256)", False
    try:
        mod = _import_artifact(out / entry["python"], code, entry["python_sha256"], manifest["source_dirs"])
    except Exception as e:  # e.g. a callback module that changed since the build: regenerate and re-check
        return None, f"the matcher of rule set {picked} in {out} failed to load ({type(e).__name__}: {e})", True
    return RuleSet(name=picked, doc=entry["doc"], matcher=mod.MATCHER, egglog_path=out / entry["egglog"],
                   egglog_sha256=entry["egglog_sha256"], has_callbacks=entry["has_callbacks"],
                   egglog_skipped=[(a, b) for a, b in entry["egglog_skipped"]]), "", False


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
    rs, problem, regenerate = _try_load(out, sources, name)
    if rs is None and rebuild:
        # an intact artifact that fails to load is regenerated too: the build reports what is wrong with it
        build(sources, out, force=regenerate)
        rs, problem, _ = _try_load(out, sources, name)  # fails only if the files changed while building
    if rs is None:
        raise StaleBuildError(f"{problem}; run `rulec build`")
    return rs
