"""The back half of the compiler: artifacts in a build folder, with a manifest.

One Python matcher module and one egglog program per rule set. The manifest
records the source hashes, the rulec and egglog versions, and the sha256 of
every artifact. Every file is written atomically (temp file + rename) and the
manifest last. Nothing in the folder is trusted: a manifest of the wrong shape
is treated as absent, and an artifact is reused (here) or imported (by the
loader) only when its content hash matches the manifest, so a build killed
between its artifacts and its manifest, or a truncated or edited artifact, is
regenerated rather than used.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__
from .check import check_build_size
from .compiler import Project, compile_project, display_path
from .diagnostics import Reporter
from .emit_python import emit_python
from .reading import SourceError, read_source
from rulec.runtime import resources
from rulec.runtime.resources import rules_dir

MANIFEST = "manifest.json"
FORMAT = 2  # 2: absolute source keys, artifact hashes


class BuildFolderError(RuntimeError):
    """The build folder cannot be created or written; the message is one line."""


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


# Marks our temp files: the only files a build ever deletes (the folder may be one the user shares with others)
TEMP_SUFFIX = ".rulec-tmp"


def atomic_write(path: Path, text: str) -> str:
    """Write `text` as UTF-8 through a temp file and a rename; return the sha256 of the bytes written."""
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return sha256(data)


def file_sha256(path: Path) -> str | None:
    """The hash of a file's bytes, or None when it cannot be read (missing, a folder, ...)."""
    try:
        return sha256(path.read_bytes())
    except OSError:
        return None


# ------------------------------------------------------------------ the manifest's shape

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _valid_entry(name: str, e: Any) -> bool:
    """One rule set's entry; artifact names are fixed by the set's name, so a manifest can't point elsewhere."""
    return (isinstance(e, dict) and bool(_NAME.match(name))
            and e.get("python") == f"{name}.py" and e.get("egglog") == f"{name}.egg"
            and all(isinstance(e.get(k), str) and _HEX64.match(e[k]) for k in ("inputs", "python_sha256",
                                                                               "egglog_sha256"))
            and isinstance(e.get("file"), str) and isinstance(e.get("doc"), str)
            and type(e.get("rules")) is int and type(e.get("has_callbacks")) is bool
            and isinstance(e.get("egglog_skipped"), list)
            and all(_is_str_list(s) and len(s) == 2 for s in e["egglog_skipped"]))


def valid_manifest(data: Any) -> bool:
    return (isinstance(data, dict) and data.get("format") == FORMAT
            and isinstance(data.get("rulec"), str) and isinstance(data.get("egglog"), str)
            and isinstance(data.get("sources"), dict)
            and all(isinstance(v, str) for v in data["sources"].values())
            and _is_str_list(data.get("paths")) and _is_str_list(data.get("source_dirs"))
            and isinstance(data.get("rulesets"), dict)
            and all(_valid_entry(n, e) for n, e in data["rulesets"].items()))


def read_manifest(out_dir: Path) -> dict | None:
    """The build folder's manifest, or None when it is missing, unreadable or not of the expected shape."""
    try:
        data = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if valid_manifest(data) else None


def artifacts_intact(out_dir: Path, entry: dict) -> bool:
    """Both artifacts of a manifest entry exist and hash to what the manifest recorded."""
    return (file_sha256(out_dir / entry["python"]) == entry["python_sha256"]
            and file_sha256(out_dir / entry["egglog"]) == entry["egglog_sha256"])


# ------------------------------------------------------------------ sources

# What generated code depends on: the generators, and the run-time modules whose names it binds (an
# artifact that reads a helper by a name the runtime no longer has must be regenerated, not imported).
GENERATORS = ("emit_python.py", "emit_egglog.py", "variants.py", "exprs.py")  # exprs: the Python of guards
RUNTIME_BINDINGS = ("genlib.py", "helpers.py", "schedule_helpers.py", "matcher.py")


def _generator_hash() -> str:
    """The code generators' own source and the runtime API they emit calls to: a change regenerates every
    artifact."""
    here, runtime = Path(__file__).parent, Path(resources.__file__).parent
    paths = [here / f for f in GENERATORS] + [runtime / f for f in RUNTIME_BINDINGS]
    return sha256("".join(p.read_text() for p in paths))


def _ops_text() -> str:
    return (rules_dir() / "ops.yaml").read_text()


def source_key(path: Path) -> str:
    """A source file's key in the manifest: its absolute resolved path, whatever the working directory."""
    return os.path.realpath(path)  # as Path.resolve, but a symlink loop is no exception


def _text_hash(path: Path) -> str:
    """The hash of a file's text as the compiler reads it (UTF-8, universal newlines)."""
    try:
        return sha256(read_source(path))
    except SourceError:
        return "unreadable"  # never equal to a recorded hash: the loader rebuilds and reports the error


def source_hashes(project_or_paths: Project | list) -> dict[str, str]:
    if isinstance(project_or_paths, Project):
        project = project_or_paths
        return {source_key(f): sha256(project.sources[display_path(f)]) for f in project.files}
    from .parse import rule_files

    return {source_key(f): _text_hash(f) for f in rule_files(project_or_paths)}


# ------------------------------------------------------------------ the build folder

def _folder_error(out: Path, e: OSError) -> BuildFolderError:
    return BuildFolderError(f"cannot write the build folder {out}: {e.strerror or e}")


def _prepare_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BuildFolderError(f"the build folder {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _folder_error(out, e) from None


_TEMP_MAX_AGE_S = 600


def _remove_abandoned_temps(out: Path) -> None:
    """Temp files of a killed build; a young one may belong to a build running right now.

    Only files named like `atomic_write`'s temps are touched: `-o` may name a folder that holds other files.
    """
    now = time.time()
    try:
        for p in out.iterdir():
            if (p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX) and p.is_file()
                    and now - p.stat().st_mtime > _TEMP_MAX_AGE_S):
                p.unlink(missing_ok=True)
    except OSError:
        pass


@dataclass
class BuildResult:
    out_dir: Path
    project: Project
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


def build(paths: list[str | Path] | None = None, out_dir: str | Path | None = None, force: bool = False,
          ) -> BuildResult:
    """Compile rule files into `out_dir`.

    Raises CompileError when any rule file has errors, BuildFolderError when the folder can't be written.
    """
    paths = list(paths) if paths else default_sources()
    out = Path(out_dir) if out_dir is not None else default_build_dir(paths)
    project = compile_project(paths, import_callbacks=True)
    rep = Reporter()
    check_build_size(project.rulesets, rep)
    rep.raise_if_errors()
    _prepare_folder(out)
    try:
        return _write_build(paths, out, project, force)
    except OSError as e:
        raise _folder_error(out, e) from None


# the first line of every generated artifact (emit_python.py, emit_egglog.py)
_ARTIFACT_MARKS = {".py": b"# Generated by rulec ", ".egg": b";; Generated by rulec "}


def _replaceable(path: Path, listed: set[str]) -> bool:
    """Whether a build may write `path`: absent, recorded by the folder's manifest, or rulec's by its content.

    `-o` may name a folder that holds the user's own files (a `setup.py`, a web app's `manifest.json`); a
    rule set of that name must not overwrite them. A damaged manifest (not JSON) is ours to repair.
    """
    if not os.path.lexists(path) or path.name in listed:
        return True
    if not path.is_file():  # a rename onto a folder fails anyway, and says so ("cannot write")
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20 if path.name == MANIFEST else 64)
    except OSError:
        return False
    if path.name == MANIFEST:
        try:
            data = json.loads(head.decode("utf-8"))
        except (ValueError, RecursionError):
            return True
        return isinstance(data, dict) and "rulec" in data
    return head.startswith(_ARTIFACT_MARKS.get(path.suffix, b"\0"))


def _check_replaceable(out: Path, project: Project, old: dict) -> None:
    listed = {e[k] for e in old.get("rulesets", {}).values() for k in ("python", "egglog")}
    for name in [MANIFEST, *(f"{n}{ext}" for n in project.rulesets for ext in (".py", ".egg"))]:
        if not _replaceable(out / name, listed):
            raise BuildFolderError(f"refusing to overwrite {out / name}: it was not written by rulec "
                                   f"(build into another folder with -o)")


def _write_build(paths: list[str | Path], out: Path, project: Project, force: bool) -> BuildResult:
    _remove_abandoned_temps(out)
    old = read_manifest(out) or {}
    _check_replaceable(out, project, old)
    old_sets = old.get("rulesets", {}) if old.get("rulec") == __version__ else {}
    keys = {display_path(f): source_key(f) for f in project.files}
    hashes = source_hashes(project)
    base = sha256(f"{__version__}\0{egglog_version()}\0{_ops_text()}\0{_generator_hash()}")
    result = BuildResult(out, project)
    entries: dict[str, dict] = {}
    for name, rs in project.rulesets.items():
        files = sorted({keys[project.rulesets[n].file] for n in project.closure(name)})
        inputs = sha256(base + "".join(hashes[f] for f in files) + name)
        entry = {"file": keys[rs.file], "inputs": inputs, "python": f"{name}.py", "egglog": f"{name}.egg",
                 "doc": rs.doc, "rules": len(project.rules_of(name)),
                 "has_callbacks": any(r.call is not None for r in project.rules_of(name))}
        prev = old_sets.get(name)
        if not force and prev and prev["inputs"] == inputs and artifacts_intact(out, prev):
            entries[name] = {**prev, **entry}
            result.reused.append(name)
            continue
        rules = project.rules_of(name)
        entry["python_sha256"] = atomic_write(out / entry["python"], emit_python(name, rs.doc, rules))
        egg = _emit_egglog(name, rules)
        entry["egglog_sha256"] = atomic_write(out / entry["egglog"], egg.text)
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
