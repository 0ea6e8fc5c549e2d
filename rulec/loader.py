"""rulec.load(): find a compiled rule set, rebuilding it first if its sources changed.

Policy: loading never uses a stale artifact. If a rule file changed since the
build, `load` rebuilds (incrementally; only the affected rule sets are
regenerated). Pass `rebuild=False` to get a StaleBuildError instead.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .build import build, default_build_dir, default_sources, read_manifest, source_hashes
from .ruleset import RuleSet


class StaleBuildError(RuntimeError):
    pass


class RuleSetNotFound(LookupError):
    pass


_modules: dict[tuple[str, str], ModuleType] = {}


def _import_artifact(path: Path, key: str, source_dirs: list[str]) -> ModuleType:
    cache_key = (str(path), key)
    mod = _modules.get(cache_key)
    if mod is None:
        modname = f"rulec_generated.{path.stem}_{key[:12]}"
        spec = importlib.util.spec_from_file_location(modname, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        # callbacks may live beside their rule files, as the compiler allowed when it checked them
        added = [d for d in source_dirs if d not in sys.path]
        sys.path[:0] = added
        try:
            spec.loader.exec_module(mod)
        finally:
            for d in added:
                sys.path.remove(d)
        _modules[cache_key] = mod
    return mod


def load(name_or_path: str | Path, name: str | None = None, build_dir: str | Path | None = None,
         rebuild: bool = True) -> RuleSet:
    """Load a rule set.

    `name_or_path` is a rule-set name from rulec's own rules/ folder ("symbolic"),
    or a rule file or folder, optionally suffixed with ":name" to pick one set.
    A file holding a single rule set needs no name.
    """
    text = str(name_or_path)
    sources: list[Path]
    path_part, _, suffix = text.rpartition(":") if ":" in text and not Path(text).exists() else (text, "", "")
    if Path(path_part).exists() and (Path(path_part).is_dir() or path_part.endswith((".yaml", ".yml"))):
        sources = [Path(path_part)]
        name = name or (suffix or None)
    else:
        sources = default_sources()
        name = name or text
    out = Path(build_dir) if build_dir is not None else default_build_dir(sources)
    manifest = read_manifest(out)
    stale = manifest is None or manifest.get("sources") != source_hashes(sources)
    if stale:
        if not rebuild:
            raise StaleBuildError(f"the build in {out} is out of date with its rule files; run `rulec build`")
        build(sources, out)
        manifest = read_manifest(out)
        assert manifest is not None
    sets = manifest["rulesets"]
    if name is None:
        own = [n for n, e in sets.items() if Path(e["file"]).resolve() == sources[0].resolve()]
        if len(own) != 1:
            raise RuleSetNotFound(f"{sources[0]} defines {len(own)} rule sets ({', '.join(own)}); "
                                  f"pick one with '{sources[0]}:NAME'")
        name = own[0]
    entry = sets.get(name)
    if entry is None:
        import difflib

        close = difflib.get_close_matches(name, list(sets), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(sets))}"
        raise RuleSetNotFound(f"no rule set named '{name}'{hint}")
    mod = _import_artifact(out / entry["python"], entry["inputs"], manifest.get("source_dirs", []))
    return RuleSet(name=name, doc=entry.get("doc", ""), matcher=mod.MATCHER,
                   egglog_path=out / entry["egglog"], has_callbacks=entry["has_callbacks"],
                   egglog_skipped=[tuple(x) for x in entry.get("egglog_skipped", [])])
