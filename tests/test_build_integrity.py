"""Build artifacts are verified, not trusted: killed builds, tampered or truncated artifacts,
malformed manifests, and build folders that can't be written."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rulec import build as build_mod
from rulec.build import BuildFolderError, build, read_manifest
from rulec.loader import StaleBuildError, load
from rulec.ruleset import EngineError
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)
SETS = [f"k{i}" for i in range(6)]


def rule_file(name: str, value: int) -> str:
    return f"{name}:\n  rules:\n    - name: mul-zero\n      match: (MUL _ 0)\n      rewrite: {value}\n"


def write_sources(src: Path, values: dict[str, int]) -> None:
    src.mkdir(exist_ok=True)
    for name, v in values.items():
        (src / f"{name}.yaml").write_text(rule_file(name, v))


def loaded_value(src: Path, out: Path, name: str, **kw) -> int:
    return load(src, name=name, build_dir=out, **kw).rewrite(x * 0).arg


@pytest.fixture
def project(tmp_path) -> tuple[Path, Path]:
    src, out = tmp_path / "src", tmp_path / "out"
    write_sources(src, {n: 1 for n in SETS[:3]})
    build([src], out)
    return src, out


# ------------------------------------------------------------------ killed builds

class Killed(BaseException):
    """The process dying at a chosen point."""


def _build_killed_before_manifest(src: Path, out: Path, monkeypatch) -> None:
    real_replace = os.replace

    def die_at_manifest(a, b):
        if Path(b).name == build_mod.MANIFEST:
            raise Killed  # after every artifact is in place, before the manifest
        real_replace(a, b)

    monkeypatch.setattr(os, "replace", die_at_manifest)
    with pytest.raises(Killed):
        build([src], out)
    monkeypatch.setattr(os, "replace", real_replace)


def test_build_killed_before_its_manifest_never_leaves_stale_code(project, monkeypatch):
    src, out = project
    write_sources(src, {"k0": 2})
    _build_killed_before_manifest(src, out, monkeypatch)
    write_sources(src, {"k0": 1})  # back to what the manifest describes
    assert "k0" in build([src], out).built  # not "up to date": its artifact is the killed build's
    assert loaded_value(src, out, "k0") == 1
    write_sources(src, {"k0": 3})
    _build_killed_before_manifest(src, out, monkeypatch)
    write_sources(src, {"k0": 1})
    assert loaded_value(src, out, "k0") == 1  # load alone repairs it too
    assert loaded_value(src, out, "k0", rebuild=False) == 1


LOAD_ALL = """
import json, sys
from rulec.loader import load
from rulec.runtime.ir.uop import UOp
x = UOp.variable("x", 0, 10)
print(json.dumps({n: load(sys.argv[1], name=n, build_dir=sys.argv[2]).rewrite(x * 0).arg for n in sys.argv[3:]}))
"""


def _cli_build(src: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rulec.cli", "build", "-q", str(src), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_sigkill_at_random_points_then_load_equals_current_sources(tmp_path):
    rng = random.Random(7)
    src, out = tmp_path / "src", tmp_path / "out"
    values = {n: 1 for n in SETS}
    write_sources(src, values)
    t0 = time.perf_counter()
    assert _cli_build(src, out).wait() == 0
    full = time.perf_counter() - t0
    for trial in range(4):
        before = dict(values)
        changed = rng.sample(SETS, rng.randint(1, len(SETS)))
        values.update({n: 10 * (trial + 2) + i for i, n in enumerate(changed)})
        write_sources(src, values)
        proc = _cli_build(src, out)
        time.sleep(rng.uniform(0.2, 1.0) * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if rng.random() < 0.6:  # go back to the sources the last complete manifest may describe
            values = before
            write_sources(src, values)
        r = subprocess.run([sys.executable, "-c", LOAD_ALL, str(src), str(out), *SETS],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == values, f"trial {trial}"


def test_temp_files_of_a_killed_build_are_swept_once_abandoned(project):
    src, out = project
    old, young = out / ".k0.py.abc123.rulec-tmp", out / ".k1.egg.def456.rulec-tmp"
    old.write_text("half")
    young.write_text("half")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    build([src], out)
    assert not old.exists() and young.exists()  # a young one may belong to a build running now


# ------------------------------------------------------------------ artifacts checked before use

def test_tampered_module_is_never_imported(project, tmp_path):
    src, out = project
    marker = tmp_path / "ran"
    (out / "k1.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + (out / "k1.py").read_text())
    with pytest.raises(StaleBuildError, match="k1 .* does not match its manifest"):
        load(src, name="k1", build_dir=out, rebuild=False)
    assert not marker.exists()
    assert loaded_value(src, out, "k1") == 1  # rebuilt, not imported
    assert not marker.exists()
    assert loaded_value(src, out, "k1", rebuild=False) == 1


@pytest.mark.parametrize("artifact", ["k2.py", "k2.egg"])
def test_truncated_artifact_is_regenerated_by_build_and_by_load(project, artifact):
    src, out = project
    path = out / artifact
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(StaleBuildError):
        load(src, name="k2", build_dir=out, rebuild=False)
    res = build([src], out)
    assert res.built == ["k2"] and path.read_bytes() == good
    path.write_bytes(good[:10])
    assert loaded_value(src, out, "k2") == 1 and path.read_bytes() == good
    path.unlink()
    assert build([src], out).built == ["k2"]


def test_egglog_program_changed_after_load_is_refused(project):
    src, out = project
    rs = load(src, name="k0", build_dir=out)
    assert rs.rewrite(x * 0, engine="egglog").arg == 1
    rs.egglog_path.write_text(rs.egglog_path.read_text() + "\n")
    with pytest.raises(EngineError, match="changed since the rule set was loaded"):
        rs.rewrite(x * 0, engine="egglog")
    assert load(src, name="k0", build_dir=out).rewrite(x * 0, engine="egglog").arg == 1


# ------------------------------------------------------------------ the manifest

def _entry_less(key):
    def f(m):
        del m["rulesets"]["k0"][key]
    return f


def _top_less(key):
    def f(m):
        del m[key]
    return f


def _set(path, value):
    def f(m):
        d = m
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return f


ENTRY_KEYS = ["file", "inputs", "python", "egglog", "python_sha256", "egglog_sha256", "doc", "rules",
              "has_callbacks", "egglog_skipped"]
TOP_KEYS = ["format", "rulec", "egglog", "sources", "paths", "source_dirs", "rulesets"]
BAD_EDITS = {
    **{f"no-entry-{k}": _entry_less(k) for k in ENTRY_KEYS},
    **{f"no-{k}": _top_less(k) for k in TOP_KEYS},
    "entry-is-a-list": _set(["rulesets", "k0"], []),
    "rulesets-is-a-list": _set(["rulesets"], []),
    "python-elsewhere": _set(["rulesets", "k0", "python"], "../k0.py"),
    "hash-not-hex": _set(["rulesets", "k0", "python_sha256"], "zz"),
    "rules-a-string": _set(["rulesets", "k0", "rules"], "1"),
    "skipped-wrong-shape": _set(["rulesets", "k0", "egglog_skipped"], [["a"]]),
    "sources-values-ints": _set(["sources"], {"a": 1}),
    "bad-set-name": _set(["rulesets", "../x"], {}),
}
BAD_TEXTS = {"list": "[]", "string": '"x"', "null": "null", "truncated": None, "not-json": "{{{",
             "deep": "[" * 100_000 + "]" * 100_000, "binary": "\udcff"}


def _damage(mpath: Path, edit: str) -> None:
    text = mpath.read_text()
    if edit.startswith("text-"):
        bad = BAD_TEXTS[edit[5:]]
        bad = text[: len(text) // 2] if bad is None else bad
        mpath.write_bytes(bad.encode("utf-8", "surrogateescape"))
    else:
        m = json.loads(text)
        BAD_EDITS[edit](m)
        mpath.write_text(json.dumps(m))


@pytest.fixture(scope="module")
def one_build(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("manifest")
    write_sources(root / "src", {"k0": 1})
    build([root / "src"], root / "out")
    return root / "src", root / "out"


@pytest.mark.parametrize("edit", list(BAD_EDITS) + [f"text-{k}" for k in BAD_TEXTS])
def test_manifest_of_the_wrong_shape_reads_as_absent(one_build, tmp_path, edit):
    out = tmp_path / "out"
    out.mkdir()
    (out / build_mod.MANIFEST).write_bytes((one_build[1] / build_mod.MANIFEST).read_bytes())
    assert read_manifest(out) is not None
    _damage(out / build_mod.MANIFEST, edit)
    assert read_manifest(out) is None


@pytest.mark.parametrize("edit", ["no-entry-python_sha256", "python-elsewhere", "text-truncated", "text-deep"])
def test_malformed_manifest_is_repaired_never_a_traceback(one_build, edit):
    src, out = one_build
    _damage(out / build_mod.MANIFEST, edit)
    with pytest.raises(StaleBuildError, match="no valid manifest"):
        load(src, name="k0", build_dir=out, rebuild=False)
    assert loaded_value(src, out, "k0") == 1  # load repairs it
    assert read_manifest(out) is not None
    _damage(out / build_mod.MANIFEST, edit)
    assert build([src], out).built == ["k0"]  # and so does build
    assert loaded_value(src, out, "k0", rebuild=False) == 1


def test_manifest_keys_do_not_depend_on_the_working_directory(tmp_path, monkeypatch):
    src = tmp_path / "a" / "src"
    src.parent.mkdir()
    write_sources(src, {"k0": 4})
    monkeypatch.chdir(tmp_path / "a")
    build(["src"], tmp_path / "out")
    m = read_manifest(tmp_path / "out")
    assert set(m["sources"]) == {str(src.resolve() / "k0.yaml")}
    assert m["rulesets"]["k0"]["file"] == str(src.resolve() / "k0.yaml")
    monkeypatch.chdir(tmp_path)
    assert load(src, name="k0", build_dir=tmp_path / "out", rebuild=False).rewrite(x * 0).arg == 4
    assert load(Path("a/src/k0.yaml"), build_dir=tmp_path / "out", rebuild=False).name == "k0"


def test_crlf_source_is_not_perpetually_stale(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "k0.yaml").write_bytes(rule_file("k0", 6).replace("\n", "\r\n").encode())
    build([src], tmp_path / "out")
    assert loaded_value(src, tmp_path / "out", "k0", rebuild=False) == 6


# ------------------------------------------------------------------ build folders

def _cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "rulec.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})})


def _one_line_error(r) -> str:
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rulec: error: "), r.stderr
    return lines[0]


@pytest.fixture
def folder_case(tmp_path):
    write_sources(tmp_path / "src", {"k0": 1})
    (tmp_path / "afile").write_text("not a folder\n")
    return tmp_path


def test_output_naming_a_file_is_one_line_error(folder_case):
    line = _one_line_error(_cli("build", "-q", "src", "-o", "afile", cwd=folder_case))
    assert "afile is a file, not a folder" in line
    line = _one_line_error(_cli("build", "-q", "src", "-o", "afile/sub", cwd=folder_case))
    assert "cannot write the build folder afile/sub" in line
    line = _one_line_error(_cli("show", "k0", "src", "-o", "afile/sub", cwd=folder_case))
    assert (folder_case / "afile").read_text() == "not a folder\n"


def test_unusable_cache_dir_is_one_line_error(folder_case):
    env = {"RULEC_CACHE_DIR": str(folder_case / "afile" / "cache")}
    line = _one_line_error(_cli("build", "-q", "src", cwd=folder_case, env=env))
    assert "cannot write the build folder" in line and "afile" in line


def test_unwritable_artifact_path_is_one_line_error(folder_case):
    # a folder where an artifact must go: renaming onto it fails even for root
    (folder_case / "out" / "k0.py").mkdir(parents=True)
    line = _one_line_error(_cli("build", "-q", "src", "-o", "out", cwd=folder_case))
    assert "cannot write the build folder out" in line


def test_load_into_an_unusable_folder_raises_a_clear_error(folder_case):
    with pytest.raises(BuildFolderError, match="cannot write the build folder .*afile"):
        load(folder_case / "src", build_dir=folder_case / "afile" / "sub")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores mode bits; the cases above cover this error as root")
def test_read_only_folder_is_one_line_error(folder_case):
    ro = folder_case / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        line = _one_line_error(_cli("build", "-q", "src", "-o", "ro/out", cwd=folder_case))
        assert "cannot write the build folder ro/out" in line
    finally:
        ro.chmod(0o755)


def test_a_read_only_up_to_date_build_still_loads(project, monkeypatch):
    src, out = project

    def no_writes(*a, **k):
        raise AssertionError("a fresh build must load without writing")

    monkeypatch.setattr(build_mod, "atomic_write", no_writes)
    assert loaded_value(src, out, "k2") == 1


# ------------------------------------------------------------------ artifacts that no longer fit the runtime

def test_an_intact_artifact_that_fails_to_load_is_regenerated(project):
    """An artifact made by an older generator can read a runtime name that is gone: its hash still matches
    the manifest, so only importing it tells. Loading regenerates it instead of raising that error."""
    src, out = project
    py = out / "k1.py"
    stale = "from rulec.runtime.engine.helpers import HELPERS as _H\n_gone = _H['no_such_helper']\n"
    py.write_text(stale)
    manifest = json.loads((out / build_mod.MANIFEST).read_text())
    manifest["rulesets"]["k1"]["python_sha256"] = build_mod.sha256(stale)
    (out / build_mod.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(StaleBuildError, match="failed to load"):
        loaded_value(src, out, "k1", rebuild=False)
    assert loaded_value(src, out, "k1") == 1
    assert py.read_text() != stale


@pytest.mark.parametrize("module", ["genlib.py", "helpers.py", "matcher.py"])
def test_the_runtime_api_that_generated_code_calls_is_a_build_input(monkeypatch, module):
    """A change to a runtime module generated code binds to regenerates every artifact."""
    before = build_mod.generator_sha256()
    real = Path.read_bytes

    def edited(self, *a, **kw):
        data = real(self, *a, **kw)
        return data + b"\n# edited\n" if self.name == module and self.parent.name != "rulec" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert build_mod.generator_sha256() != before


# ------------------------------------------------------------------ the bytecode cache

@pytest.fixture
def writes_bytecode(monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # the environment may set PYTHONDONTWRITEBYTECODE


def test_bytecode_cache_is_bound_to_the_verified_source(project, writes_bytecode):
    """A cache file made from other source (or another interpreter's format) fails its seal: the module runs
    from the verified .py, never from the cache."""
    import marshal

    from rulec.runtime.engine import artifacts

    src, out = project
    from rulec.runtime.engine import artifacts as arts

    arts._modules.clear()
    assert loaded_value(src, out, "k1") == 1
    (cache,) = out.glob(".k1-*.code")
    other = compile("raise SystemExit('ran the cache, not the verified source')", "x", "exec")
    data = marshal.dumps(other)
    wrong_digest = "0" * 64  # a seal made for another source: self-consistent, and refused
    cache.write_bytes(artifacts._code_seal(wrong_digest, data) + data)
    artifacts._modules.clear()
    assert loaded_value(src, out, "k1") == 1


def test_sets_whose_names_share_a_prefix_keep_their_own_bytecode(tmp_path, writes_bytecode):
    from rulec.runtime.engine import artifacts

    src = tmp_path / "src"
    write_sources(src, {"foo": 1, "foo-zed": 2})
    out = tmp_path / "out"
    build([src], out)
    artifacts._modules.clear()
    assert loaded_value(src, out, "foo") == 1 and loaded_value(src, out, "foo-zed") == 2
    bar = list(out.glob(".foo-zed-*.code"))
    assert len(bar) == 1
    for cache in out.glob(".foo-[0-9a-f]*.code"):
        cache.unlink()  # a cache miss for `foo`: loading it writes its cache, and touches no other set's
    artifacts._modules.clear()
    assert loaded_value(src, out, "foo") == 1
    assert bar[0].exists() and len(list(out.glob(".*.code"))) == 2


def test_an_edit_to_any_compiler_module_or_to_ops_yaml_makes_a_build_stale(monkeypatch, project):
    from rulec.runtime.engine import artifacts

    src, out = project
    assert artifacts._current(out, [src])[0] is not None
    real = Path.read_bytes

    def edited(name):
        def read(self, *a, **kw):
            data = real(self, *a, **kw)
            return data + b"\n# edited\n" if self.name == name else data
        return read

    monkeypatch.setattr(Path, "read_bytes", edited("pipeline_check.py"))  # not a code generator by name
    assert "other code generators" in artifacts._current(out, [src])[1]
    monkeypatch.setattr(Path, "read_bytes", edited("ops.yaml"))
    assert "another op table" in artifacts._current(out, [src])[1]


def test_no_bytecode_is_written_when_python_is_asked_not_to(project, monkeypatch):
    from rulec.runtime.engine import artifacts

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    src, out = project
    artifacts._modules.clear()
    assert loaded_value(src, out, "k0") == 1 and not list(out.glob(".k0-*.code"))
