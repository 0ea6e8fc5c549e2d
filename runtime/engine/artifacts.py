"""The runtime's side of a build folder: find, verify and import what `rulec build` wrote.

The compiler writes a build folder (rulec/build.py); the runtime only reads it, the way
Cranelift's backends consume ISLE's generated Rust or Go's compiler its generated
rewrite rules. Reading needs no YAML parser and no compiler module: the manifest is
JSON, rule sets are generated Python modules, the scheduler's pipeline is a JSON
artifact. Each is used only when its sha256 matches the manifest.

Staleness stays checked: the manifest records the sha256 of every rule file's bytes
and of the compiler's code generators. When either changed (or an artifact is damaged,
or the manifest is missing), the build is redone by the compiler, which is imported
only then, through the hook the `rulec` package registers (`set_rebuilder`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any, Callable

from rulec.runtime.resources import cache_root, prebuilt_dir

if TYPE_CHECKING:
    from rulec.runtime.engine.ruleset import RuleSet

MANIFEST = "manifest.json"
FORMAT = 3  # 3: raw-byte source hashes, generator hash, pipeline artifacts
# a rule file larger than this is refused by the compiler, so hashing never reads more
MAX_SOURCE_BYTES = 1 << 20


class StaleBuildError(RuntimeError):
    pass


class RuleSetNotFound(LookupError):
    pass


# ------------------------------------------------------------------ hashing and locations

def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def file_sha256(path: Path) -> str | None:
    """The hash of a file's bytes, or None when it cannot be read (missing, a folder, ...)."""
    try:
        return sha256(path.read_bytes())
    except OSError:
        return None


def source_sha256(path: Path) -> str:
    """The hash of a rule file's bytes, reading only a regular file of a rule file's size (a FIFO or
    /dev/zero named *.yaml must not hang the staleness check); "unreadable" never equals a recorded hash."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
            return "unreadable"
        with open(path, "rb") as f:
            return sha256(f.read(MAX_SOURCE_BYTES + 1))
    except OSError:
        return "unreadable"


def source_key(path: Path) -> str:
    """A source file's key in the manifest: its absolute resolved path, whatever the working directory."""
    return os.path.realpath(path)  # as Path.resolve, but a symlink loop is no exception


def rule_files(paths: list[str | Path]) -> list[Path]:
    """Expand folders into their *.yaml files (recursively), in a stable order; each file once.

    The op table (ops.yaml) and pipeline files are among them: the compiler checks each by its kind.
    """
    out: list[Path] = []
    seen: set[str] = set()
    for p in map(Path, paths):
        for f in sorted(p.rglob("*.yaml")) if p.is_dir() else [p]:
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def source_hashes(paths: list[str | Path]) -> dict[str, str]:
    return {source_key(f): source_sha256(f) for f in rule_files(paths)}




def default_build_dir(paths: list[str | Path]) -> Path:
    """Where sources are built when no folder is given: a user-cache folder keyed by their absolute paths
    (never the install folder, which may not be writable)."""
    key = sha256("\0".join(sorted(str(Path(p).resolve()) for p in paths)))[:16]
    return cache_root() / key


def default_sources() -> list[Path]:
    from rulec.runtime.resources import rules_dir

    return [rules_dir()]


# What generated code depends on besides the rule files: the compiler (every module of it shapes what it
# writes), and the runtime modules whose names generated code binds. The runtime hashes their bytes and
# imports none of them.
RUNTIME_BINDINGS = ("engine/genlib.py", "engine/helpers.py", "schedule/helpers.py", "schedule/multi.py",
                    "codegen/helpers.py",
                    "engine/matcher.py", "ir/bounds_table.py", "engine/egraph.py", "ir/dtype.py")


def generator_sha256() -> str:
    """One hash over the compiler's modules and the runtime API generated code calls: a change regenerates
    every artifact. A file missing from an install hashes as absent."""
    import rulec

    compiler, runtime = Path(rulec.__file__).parent, Path(__file__).parent.parent
    paths = sorted(compiler.glob("*.py")) + [runtime / f for f in RUNTIME_BINDINGS]
    return sha256("\0".join(f"{p.parent.name}/{p.name}:{file_sha256(p)}" for p in paths))


def ops_sha256() -> str:
    """The op table's hash: every artifact depends on it (ops, groups, arity, costs)."""
    from rulec.runtime.resources import rules_dir

    return file_sha256(rules_dir() / "ops.yaml") or "unreadable"


# ------------------------------------------------------------------ the manifest's shape

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_PIPELINE_ARTIFACT = re.compile(r"pipeline-[0-9a-f]{16}\.json\Z")


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_hex(v: Any) -> bool:
    return isinstance(v, str) and bool(_HEX64.match(v))


def _valid_entry(name: str, e: Any) -> bool:
    """One rule set's entry; artifact names are fixed by the set's name, so a manifest can't point elsewhere."""
    return (isinstance(e, dict) and bool(_NAME.match(name))
            and e.get("python") == f"{name}.py"
            and all(_is_hex(e.get(k)) for k in ("inputs", "python_sha256"))
            # no egglog program when not one rule of the set can run on egglog
            and ((e.get("egglog") == f"{name}.egg" and _is_hex(e.get("egglog_sha256")))
                 or (e.get("egglog") is None and e.get("egglog_sha256") is None))
            and isinstance(e.get("file"), str) and isinstance(e.get("doc"), str) and _is_str_list(e.get("includes"))
            and type(e.get("rules")) is int and type(e.get("has_callbacks")) is bool
            and isinstance(e.get("egglog_skipped"), list)
            and all(_is_str_list(s) and len(s) == 2 for s in e["egglog_skipped"]))


def _valid_pipeline_entry(key: str, e: Any) -> bool:
    return (isinstance(e, dict) and isinstance(e.get("artifact"), str)
            and bool(_PIPELINE_ARTIFACT.match(e["artifact"])) and e["artifact"] == pipeline_artifact_name(key)
            and _is_hex(e.get("sha256")))


def pipeline_artifact_name(stored_key: str) -> str:
    """A pipeline file's artifact, named by its key as the manifest stores it: two `pipeline.yaml` in one
    build never collide."""
    return f"pipeline-{sha256(stored_key)[:16]}.json"


# A relocatable build (the one a wheel ships) keys its sources by their path relative to this package's
# folder, resolved where rulec is installed; any other build keys them by absolute path.
RELOCATABLE_ROOT = "rulec.rules"


def valid_manifest(data: Any) -> bool:
    return (isinstance(data, dict) and data.get("format") == FORMAT
            and data.get("root", RELOCATABLE_ROOT) == RELOCATABLE_ROOT
            and isinstance(data.get("rulec"), str) and isinstance(data.get("egglog"), str)
            and _is_hex(data.get("generator")) and isinstance(data.get("ops"), str)
            and isinstance(data.get("sources"), dict)
            and all(isinstance(v, str) for v in data["sources"].values())
            and _is_str_list(data.get("paths")) and _is_str_list(data.get("source_dirs"))
            and isinstance(data.get("rulesets"), dict)
            and all(_valid_entry(n, e) for n, e in data["rulesets"].items())
            and isinstance(data.get("pipelines"), dict)
            and all(_valid_pipeline_entry(k, e) for k, e in data["pipelines"].items()))


def read_manifest(out_dir: Path) -> dict | None:
    """The build folder's manifest, or None when it is missing, unreadable or not of the expected shape.
    The keys of a relocatable build come back absolute, as every other build's are."""
    try:
        data = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not valid_manifest(data):
        return None
    return _absolute_keys(data) if "root" in data else data


def _absolute_keys(m: dict) -> dict:
    from rulec.runtime.resources import rules_dir

    root = rules_dir()

    def key(k: str) -> str:
        return source_key(root / k)

    return {**m, "sources": {key(k): v for k, v in m["sources"].items()}, "paths": [key(p) for p in m["paths"]],
            "source_dirs": [key(d) for d in m["source_dirs"]],
            "rulesets": {n: {**e, "file": key(e["file"])} for n, e in m["rulesets"].items()},
            "pipelines": {key(k): e for k, e in m["pipelines"].items()}}


def read_verified(path: Path, expected: str) -> bytes | None:
    """A file's bytes when they hash to `expected`; None when missing, unreadable or different."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if sha256(data) == expected else None


# ------------------------------------------------------------------ the rebuild hook

# The compiler's entry point, registered by the `rulec` package; the runtime calls it only when a build is
# stale, so scheduling with a current build imports no compiler module.
Rebuilder = Callable[[list[Path], Path, bool], Any]
_rebuilder: Rebuilder | None = None


def set_rebuilder(fn: Rebuilder | None) -> None:
    global _rebuilder
    _rebuilder = fn


def _rebuild(sources: list[Path], out: Path, force: bool) -> None:
    if _rebuilder is None:
        raise StaleBuildError(f"the build in {out} is out of date and no compiler is available; run `rulec build`")
    _rebuilder(sources, out, force)


# ------------------------------------------------------------------ a verified build

_modules: dict[tuple[str, str], ModuleType] = {}


def _import_artifact(path: Path, code: bytes, digest: str, source_dirs: list[str]) -> ModuleType:
    """Run a generated matcher module from `code`, bytes already checked against the manifest."""
    cache_key = (str(path), digest)
    mod = _modules.get(cache_key)
    if mod is None:
        modname = f"rulec_generated.{path.stem}_{digest[:12]}"
        compiled = _compiled(path, code, digest)
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


_CODE_CACHE = re.compile(r"\.(?P<stem>.+)-[0-9a-f]{16}\.(?P<tag>[\w-]+)\.code\Z")


def _code_cache(path: Path, digest: str) -> Path:
    return path.with_name(f".{path.stem}-{digest[:16]}.{sys.implementation.cache_tag}.code")


def _code_seal(digest: str, data: bytes) -> bytes:
    """What a bytecode cache file starts with: a hash binding its code to the sha256 of the verified source
    it was compiled from, the interpreter's bytecode format and the optimize level, as a hash-checked .pyc
    is bound to its source. A cache file made from other source, or torn, fails the seal and is ignored."""
    header = f"{digest}\0{importlib.util.MAGIC_NUMBER.hex()}\0{sys.flags.optimize}\0".encode()
    return hashlib.sha256(header + data).digest()


def _compiled(path: Path, code: bytes, digest: str) -> CodeType:
    """The code object of a generated module, from `code` (bytes already checked against the manifest).

    Compiling a large matcher costs more than everything else a first schedule does, so the bytecode is
    kept beside it, as Python keeps .pyc files (not under the wheel's prebuilt build, which is never written,
    nor when Python is asked not to write bytecode: `-B`, PYTHONDONTWRITEBYTECODE)."""
    cache = _code_cache(path, digest)
    try:
        blob = cache.read_bytes()
        if len(blob) > 32 and _code_seal(digest, blob[32:]) == blob[:32]:
            return _relocated(marshal.loads(blob[32:]), str(path))
    except (OSError, ValueError, EOFError, TypeError):
        pass
    compiled = compile(code, str(path), "exec", dont_inherit=True)
    if sys.dont_write_bytecode or path.parent.resolve().is_relative_to(prebuilt_dir().resolve()):
        return compiled
    write_code_cache(path, digest, compiled)
    return compiled


def write_code_cache(path: Path, digest: str, compiled: CodeType) -> None:
    """Best effort, atomically; bytecode of earlier versions of this artifact is removed."""
    data = marshal.dumps(compiled)
    cache = _code_cache(path, digest)
    try:
        for old in path.parent.iterdir():
            m = _CODE_CACHE.match(old.name)
            if m and m["stem"] == path.stem and m["tag"] == sys.implementation.cache_tag and old != cache:
                old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{cache.name}.", suffix=".rulec-tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(_code_seal(digest, data) + data)
        os.chmod(tmp, 0o644)  # as readable as the artifact beside it (a wheel ships these)
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only build folder only costs the compile


def _relocated(code: CodeType, filename: str) -> CodeType:
    """`code` with `filename` as its file, in every nested code object: bytecode shipped in a wheel was
    compiled where the wheel was built, and tracebacks must name where it is installed."""
    if code.co_filename == filename:
        return code
    consts = tuple(_relocated(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


@dataclass
class Build:
    """A build folder whose manifest is current with its sources (checked when opened)."""

    out: Path
    sources: list[Path]
    manifest: dict

    def ruleset_names(self) -> list[str]:
        return list(self.manifest["rulesets"])

    def composition(self, name: str) -> list[str]:
        """The sets whose own rules make up rule set `name`, in rule order: included sets first, depth first
        in include order, each once (a diamond adds nothing twice), then the set itself; as the compiler
        orders a set's rules (model.RuleSetDef.all_rules)."""
        sets = self.manifest["rulesets"]
        out: list[str] = []
        entered = {name}
        stack = [(name, iter(sets[name]["includes"]))]
        while stack:
            current, includes = stack[-1]
            for inc in includes:
                if inc in sets and inc not in entered:
                    entered.add(inc)
                    stack.append((inc, iter(sets[inc]["includes"])))
                    break
            else:
                stack.pop()
                out.append(current)
        return out

    def _own_matcher(self, name: str):
        entry = self.manifest["rulesets"][name]
        code = read_verified(self.out / entry["python"], entry["python_sha256"])
        if code is None:
            raise LoadFailed(f"an artifact of rule set {name} in {self.out} does not match its manifest (sha256)")
        try:
            mod = _import_artifact(self.out / entry["python"], code, entry["python_sha256"],
                                   self.manifest["source_dirs"])
        except Exception as e:  # e.g. a callback module that changed since the build: regenerate and re-check
            raise LoadFailed(f"the matcher of rule set {name} in {self.out} failed to load "
                             f"({type(e).__name__}: {e})", regenerate=True) from None
        return mod.MATCHER

    def ruleset(self, name: str) -> RuleSet:
        """The compiled rule set `name`, its matcher composed from its own and its included sets' generated
        modules; LoadFailed when an artifact is damaged or fails to import."""
        from rulec.runtime.engine.ruleset import RuleSet

        entry = self.manifest["rulesets"][name]
        egg = entry["egglog"]
        if egg is not None and file_sha256(self.out / egg) != entry["egglog_sha256"]:
            raise LoadFailed(f"an artifact of rule set {name} in {self.out} does not match its manifest (sha256)")
        parts = [self._own_matcher(n) for n in self.composition(name)]
        matcher = parts[-1]
        if len(parts) > 1:
            whole = parts[0]
            for m in parts[1:]:
                whole = whole + m
            matcher = whole.named(name)
        return RuleSet(name=name, doc=entry["doc"], matcher=matcher, egglog_path=self.out / egg if egg else None,
                       egglog_sha256=entry["egglog_sha256"], has_callbacks=entry["has_callbacks"],
                       egglog_skipped=[(a, b) for a, b in entry["egglog_skipped"]])

    def pipeline(self, source: Path) -> dict:
        """The compiled pipeline of the pipeline file `source` (its JSON form)."""
        entry = self.manifest["pipelines"].get(source_key(source))
        if entry is None:
            raise LoadFailed(f"the build in {self.out} has no pipeline for {source}")
        data = read_verified(self.out / entry["artifact"], entry["sha256"])
        if data is None:
            raise LoadFailed(f"the pipeline artifact for {source} in {self.out} does not match its manifest (sha256)")
        return json.loads(data)


class LoadFailed(Exception):
    """A current manifest whose artifact can't be used; `regenerate`: rebuild even what looks current."""

    def __init__(self, message: str, regenerate: bool = False):
        super().__init__(message)
        self.regenerate = regenerate


def _current(out: Path, sources: list[Path]) -> tuple[Build | None, str]:
    manifest = read_manifest(out)
    if manifest is None:
        return None, f"the build in {out} has no valid manifest"
    if manifest["sources"] != source_hashes(sources):
        return None, f"the build in {out} is out of date with its rule files"
    if manifest["generator"] != generator_sha256():
        return None, f"the build in {out} was made by other code generators"
    if manifest["ops"] != ops_sha256():
        return None, f"the build in {out} was made with another op table (ops.yaml)"
    import rulec

    if manifest["rulec"] != rulec.__version__:
        return None, f"the build in {out} was made by rulec {manifest['rulec']}"
    return Build(out, sources, manifest), ""


def open_build(sources: list[Path], out: Path, rebuild: bool = True) -> Build:
    """The current build of `sources` in `out`, rebuilt first (by the compiler) when stale."""
    b, problem = _current(out, sources)
    if b is None and rebuild:
        _rebuild(sources, out, False)
        b, problem = _current(out, sources)  # fails only if the files changed while building
    if b is None:
        raise StaleBuildError(f"{problem}; run `rulec build`")
    return b


def use(sources: list[Path], out: Path, rebuild: bool, get: Callable[[Build], Any]) -> Any:
    """`get(build)` on a current build; a damaged or unloadable artifact is rebuilt once (if allowed)."""
    b = open_build(sources, out, rebuild)
    try:
        return get(b)
    except LoadFailed as e:
        if not rebuild:
            raise StaleBuildError(f"{e}; run `rulec build`") from None
        # an intact artifact that fails to load is regenerated too: the build reports what is wrong with it
        _rebuild(sources, out, e.regenerate)
    b = open_build(sources, out, rebuild=False)
    try:
        return get(b)
    except LoadFailed as e:
        raise StaleBuildError(f"{e}; run `rulec build`") from None


# ------------------------------------------------------------------ rulec's own rules



_shipped: dict[str, RuleSet] = {}
_shipped_build: list[Build] = []  # rulec's own build, checked current once per process


def shipped_build() -> Build:
    """The current build of rulec's own rules: the wheel's prebuilt one when it matches the installed rule
    files, else the user cache's (rebuilt there when stale; the install folder is never written).

    It is checked against the rule files once per process: a scheduler asks it for many rule sets.
    """
    if not _shipped_build:
        sources = default_sources()
        pre = prebuilt_dir()
        b = _current(pre, sources)[0] if (pre / MANIFEST).is_file() else None
        _shipped_build.append(b or open_build(sources, default_build_dir(sources)))
    return _shipped_build[0]


def forget_shipped() -> None:
    """Check rulec's own build against its rule files again at next use (a rule or pipeline file changed)."""
    _shipped_build.clear()
    _shipped.clear()


def from_shipped(get: Callable[[Build], Any]) -> Any:
    """`get` on rulec's own build; an artifact damaged since the build was checked is repaired in the user
    cache."""
    try:
        return get(shipped_build())
    except LoadFailed:
        _shipped_build.clear()
        sources = default_sources()
        out = default_build_dir(sources)
        _shipped_build.append(open_build(sources, out))
        return use(sources, out, True, get)


def shipped_ruleset(name: str) -> RuleSet:
    """A rule set of rulec's own rules/ folder."""
    rs = _shipped.get(name)
    if rs is None:
        rs = _shipped[name] = from_shipped(lambda b: b.ruleset(name))
    return rs


def shipped_matcher(name: str):
    return shipped_ruleset(name).matcher
