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

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

from . import __version__
from .check import check_build_size
from .compiler import Project, compile_project, display_path
from .diagnostics import Reporter
from .emit_pipeline import emit_pipeline
from .emit_python import emit_python
from rulec.runtime.engine.artifacts import (FORMAT, MANIFEST, RELOCATABLE_ROOT, default_build_dir, default_sources,
                                            file_sha256, generator_sha256, ops_sha256, pipeline_artifact_name,
                                            read_manifest, sha256, source_hashes, source_key)
from rulec.runtime.resources import rules_dir


class BuildFolderError(RuntimeError):
    """The build folder cannot be created or written; the message is one line."""


def egglog_version() -> str:
    try:
        return metadata.version("egglog")
    except metadata.PackageNotFoundError:
        return "missing"


# Marks our temp files: the only files a build ever deletes (the folder may be one the user shares with others)
TEMP_SUFFIX = ".rulec-tmp"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str) -> str:
    """Write `text` as UTF-8 through a temp file and a rename; return the sha256 of the bytes written."""
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an artifact is as readable as any file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return sha256(data)


def artifacts_intact(out_dir: Path, entry: dict) -> bool:
    """Both artifacts of a manifest entry exist and hash to what the manifest recorded."""
    return (file_sha256(out_dir / entry["python"]) == entry["python_sha256"]
            and (entry["egglog"] is None or file_sha256(out_dir / entry["egglog"]) == entry["egglog_sha256"]))


# ------------------------------------------------------------------ sources

def _ops_text() -> str:
    return (rules_dir() / "ops.yaml").read_text()


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
          relocatable: bool = False, progress: Callable[[str, int, int], None] | None = None) -> BuildResult:
    """Compile rule files into `out_dir`.

    `progress(name, done, total)` is called after each rule set is written or found up to date (the CLI
    draws a progress bar with it).
    `relocatable` (rulec's own rules only) keys sources relative to the installed rules folder: the build a
    wheel ships, valid wherever the wheel is installed.
    Raises CompileError when any rule file has errors, BuildFolderError when the folder can't be written.
    """
    paths = list(paths) if paths else default_sources()
    out = Path(out_dir) if out_dir is not None else default_build_dir(paths)
    # hashed before reading: a file edited while we compile reads as changed next time, never as current
    hashes = source_hashes(paths)
    project = compile_project(paths, import_callbacks=True)
    rep = Reporter()
    check_build_size(project.rulesets, rep)
    rep.raise_if_errors()
    _prepare_folder(out)
    try:
        return _write_build(paths, out, project, hashes, force, relocatable, progress)
    except OSError as e:
        raise _folder_error(out, e) from None


# the first line of every generated artifact (emit_python.py, emit_egglog.py)
_ARTIFACT_MARKS = {".py": b"# Generated by rulec ", ".egg": b";; Generated by rulec ", ".json": b'{\n "_generated_by": "rulec"'}


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


def _check_replaceable(out: Path, project: Project, old: dict, stored) -> None:
    listed = {e[k] for e in old.get("rulesets", {}).values() for k in ("python", "egglog") if e[k]}
    listed |= {e["artifact"] for e in old.get("pipelines", {}).values()}
    pipelines = [pipeline_artifact_name(stored(source_key(f))) for f in project.pipelines]
    for name in [MANIFEST, *(f"{n}{ext}" for n in project.rulesets for ext in (".py", ".egg")), *pipelines]:
        if not _replaceable(out / name, listed):
            raise BuildFolderError(f"refusing to overwrite {out / name}: it was not written by rulec "
                                   f"(build into another folder with -o)")


def _write_build(paths: list[str | Path], out: Path, project: Project, hashes: dict[str, str],
                 force: bool, relocatable: bool = False,
                 progress: Callable[[str, int, int], None] | None = None) -> BuildResult:
    _remove_abandoned_temps(out)
    old = read_manifest(out) or {}
    stored = _relative_to(rules_dir()) if relocatable else (lambda k: k)
    _check_replaceable(out, project, old, stored)
    old_sets = old.get("rulesets", {}) if old.get("rulec") == __version__ else {}
    keys = {display_path(f): source_key(f) for f in project.files}
    generator = generator_sha256()
    base = sha256(f"{__version__}\0{egglog_version()}\0{_ops_text()}\0{generator}")
    result = BuildResult(out, project)
    entries: dict[str, dict] = {}
    for name, rs in project.rulesets.items():
        files = sorted({keys[project.rulesets[n].file] for n in project.closure(name)})
        inputs = sha256(base + "".join(hashes[f] for f in files) + name)
        entry = {"file": keys[rs.file], "inputs": inputs, "python": f"{name}.py", "egglog": f"{name}.egg",
                 "doc": rs.doc, "rules": len(project.rules_of(name)), "includes": [i for i, _ in rs.include],
                 "has_callbacks": any(r.call is not None for r in project.rules_of(name))}
        prev = old_sets.get(name)
        if not force and prev and prev["inputs"] == inputs and artifacts_intact(out, prev):
            entries[name] = {**prev, **entry, "egglog": prev["egglog"]}
            result.reused.append(name)
            if progress is not None:
                progress(name, len(entries), len(project.rulesets))
            continue
        rules = project.rules_of(name)
        # the matcher holds the set's own rules; the runtime composes included sets' matchers at load
        own = {id(r) for r in rs.rules}
        entry["python_sha256"] = atomic_write(out / entry["python"],
                                              emit_python(name, rs.doc, [r for r in rules if id(r) in own]))
        egg = _emit_egglog(name, rules)
        if egg.rules:
            entry["egglog_sha256"] = atomic_write(out / entry["egglog"], egg.text)
        else:  # not one rule runs on egglog: a program would be its header alone
            entry["egglog"] = entry["egglog_sha256"] = None
        entry["egglog_skipped"] = [[r.name, reason] for r, reason in egg.skipped]
        entries[name] = entry
        result.built.append(name)
        if progress is not None:
            progress(name, len(entries), len(project.rulesets))
    pipelines = {}
    for f, spec in project.pipelines.items():
        key = stored(source_key(f))
        name = pipeline_artifact_name(key)
        pipelines[key] = {"artifact": name, "sha256": atomic_write(out / name, emit_pipeline(spec))}
    manifest = {"format": FORMAT, "rulec": __version__, "egglog": egglog_version(), "generator": generator,
                "ops": ops_sha256(),
                "pipelines": pipelines, "sources": {stored(k): v for k, v in hashes.items()},
                "paths": [stored(source_key(Path(p))) for p in paths],
                "source_dirs": sorted({stored(str(Path(source_key(f)).parent)) for f in project.files}),
                "rulesets": {n: {**e, "file": stored(e["file"])} for n, e in entries.items()}}
    if relocatable:
        manifest["root"] = RELOCATABLE_ROOT
    if manifest != old:
        atomic_write(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    _remove_dropped(out, old, manifest)
    return result


def _artifact_names(manifest: dict) -> set[str]:
    names = {e[k] for e in manifest.get("rulesets", {}).values() for k in ("python", "egglog") if e.get(k)}
    return names | {e["artifact"] for e in manifest.get("pipelines", {}).values()}


def _remove_dropped(out: Path, old: dict, new: dict) -> None:
    """Artifacts the previous manifest recorded and this one does not (a deleted rule set, a set that no
    longer has an egglog program): ours by that record, and stale. Removed after the new manifest is in
    place, so a build killed here leaves only harmless leftovers."""
    for name in _artifact_names(old) - _artifact_names(new):
        try:
            (out / name).unlink(missing_ok=True)
        except OSError:
            pass


def _relative_to(root: Path):
    root_key = source_key(root)

    def stored(key: str) -> str:
        rel = os.path.relpath(key, root_key)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError(f"a relocatable build holds only files under {root_key}, not {key}")
        return Path(rel).as_posix()

    return stored


def _emit_egglog(name: str, rules):
    from .emit_egglog import emit_egglog

    return emit_egglog(name, rules)


def build_prebuilt(out_dir: str | Path) -> BuildResult:
    """The build of rulec's own rules that a wheel ships (`setup.py` runs this into the wheel's
    `rulec/_prebuilt`): relocatable, with the generated matchers' bytecode for this Python beside them, so an
    installed rulec schedules its first program without compiling anything.

    Rule locations in the artifacts are written relative to the package (`rules/symbolic.yaml:12:3`): the
    build folder it is made in is gone once the wheel is installed."""
    from rulec.runtime.engine import artifacts

    out = Path(out_dir).resolve()
    here = os.getcwd()
    # diagnostics and rule locations name files relative to the working folder (real paths: rules/ may be a link)
    os.chdir(Path(os.path.realpath(rules_dir())).parent)
    try:
        result = build(default_sources(), out, force=True, relocatable=True)
    finally:
        os.chdir(here)
    current, problem = artifacts._current(out, default_sources())
    if current is None:
        raise RuntimeError(f"the prebuilt build is not current right after building it: {problem}")
    for entry in current.manifest["rulesets"].values():
        path = out / entry["python"]
        code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        artifacts.write_code_cache(path, entry["python_sha256"], code)
    for name in current.ruleset_names():
        current.ruleset(name)  # every set loads, from its bytecode
    from rulec.runtime.ir.ops import write_op_table_cache

    write_op_table_cache(out)
    _write_backend_data(out)
    return result


def _write_backend_data(out: Path) -> None:
    """Each backend's description, parsed, so an installed rulec renders kernels without a YAML parser."""
    import hashlib

    import yaml

    from rulec.runtime.resources import data_cache_name, write_yaml_data_cache

    backends = Path(__file__).resolve().parent.parent / "backends"
    if not backends.is_dir():  # an installed rulec: the backends are a subpackage
        import rulec.backends

        backends = Path(rulec.backends.__file__).parent
    for f in sorted(backends.glob("*/backend.yaml")):
        text = f.read_bytes()
        write_yaml_data_cache(out / data_cache_name(f, text), hashlib.sha256(text).hexdigest(), yaml.safe_load(text))
