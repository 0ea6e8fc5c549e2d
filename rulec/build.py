"""The back half of the compiler: artifacts in a build folder, with a manifest.

One Python matcher module and one egglog program per rule set. The manifest
records the source hashes and the rulec and egglog versions. Every file is
written atomically (temp file + rename) and the manifest last, so a crash never
leaves a half-written artifact. Rule sets whose inputs did not change are not
regenerated.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from . import __version__
from .compiler import Project, compile_project
from .emit_python import emit_python
from rulec.runtime.resources import rules_dir

MANIFEST = "manifest.json"
FORMAT = 1


def egglog_version() -> str:
    try:
        return metadata.version("egglog")
    except metadata.PackageNotFoundError:
        return "missing"


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def cache_root() -> Path:
    env = os.environ.get("RULEC_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rulec"


def default_build_dir(paths: list[str | Path]) -> Path:
    """Where sources are built when no -o is given: a cache folder keyed by their absolute paths."""
    key = sha256("\0".join(sorted(str(Path(p).resolve()) for p in paths)))[:16]
    return cache_root() / key


def default_sources() -> list[Path]:
    return [rules_dir()]


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(out_dir: Path) -> dict | None:
    try:
        data = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("format") == FORMAT else None


def _generator_hash() -> str:
    """The code generators' own source: a changed generator regenerates every artifact."""
    here = Path(__file__).parent
    return sha256("".join((here / f).read_text() for f in ("emit_python.py", "emit_egglog.py", "variants.py")))


def _ops_text() -> str:
    return (rules_dir() / "ops.yaml").read_text()


def source_hashes(project_or_paths: Project | list) -> dict[str, str]:
    if isinstance(project_or_paths, Project):
        return {p: sha256(t) for p, t in project_or_paths.sources.items()}
    from .parse import rule_files
    from .compiler import display_path

    return {display_path(f): sha256(f.read_bytes()) for f in rule_files(project_or_paths)}


@dataclass
class BuildResult:
    out_dir: Path
    project: Project
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


def build(paths: list[str | Path] | None = None, out_dir: str | Path | None = None, force: bool = False,
          ) -> BuildResult:
    """Compile rule files into `out_dir`; raises CompileError when any rule file has errors."""
    paths = list(paths) if paths else default_sources()
    out = Path(out_dir) if out_dir is not None else default_build_dir(paths)
    project = compile_project(paths)
    old = read_manifest(out) or {}
    old_sets = old.get("rulesets", {}) if old.get("rulec") == __version__ else {}
    hashes = {p: sha256(t) for p, t in project.sources.items()}
    base = sha256(f"{__version__}\0{egglog_version()}\0{_ops_text()}\0{_generator_hash()}")
    result = BuildResult(out, project)
    entries: dict[str, dict] = {}
    for name, rs in project.rulesets.items():
        files = sorted({project.rulesets[n].file for n in project.closure(name)})
        inputs = sha256(base + "".join(hashes[f] for f in files) + name)
        entry = {"file": rs.file, "inputs": inputs, "python": f"{name}.py", "egglog": f"{name}.egg",
                 "doc": rs.doc, "rules": len(project.rules_of(name)),
                 "has_callbacks": any(r.call is not None for r in project.rules_of(name))}
        prev = old_sets.get(name)
        if not force and prev and prev.get("inputs") == inputs and (out / entry["python"]).exists() \
                and (out / entry["egglog"]).exists():
            entries[name] = {**prev, **entry, "egglog_skipped": prev.get("egglog_skipped", [])}
            result.reused.append(name)
            continue
        rules = project.rules_of(name)
        atomic_write(out / entry["python"], emit_python(name, rs.doc, rules))
        egg = _emit_egglog(name, rules)
        atomic_write(out / entry["egglog"], egg.text)
        entry["egglog_skipped"] = [[r.name, reason] for r, reason in egg.skipped]
        entries[name] = entry
        result.built.append(name)
    manifest = {"format": FORMAT, "rulec": __version__, "egglog": egglog_version(),
                "sources": hashes, "paths": [str(Path(p).resolve()) for p in paths],
                "source_dirs": sorted({str(f.resolve().parent) for f in project.files}), "rulesets": entries}
    if manifest != old:
        atomic_write(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return result


def _emit_egglog(name: str, rules):
    from .emit_egglog import emit_egglog

    return emit_egglog(name, rules)
