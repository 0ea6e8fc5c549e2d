"""The runtime needs no compiler: it consumes the build's artifacts, as ISLE's and Go's generated matchers are
consumed by their compilers' backends. The compiler is imported only to redo a stale build."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rulec
from rulec.runtime.engine import artifacts

RUNTIME = Path(artifacts.__file__).parent.parent

PROGRAM = """
import json, sys
import numpy as np
from rulec import Tensor
a = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
out = ((a + 1).permute(2, 0, 1).reshape(4, 6).sum(1) * 2).numpy()
want = ((np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 1).transpose(2, 0, 1).reshape(4, 6).sum(1) * 2)
assert np.allclose(out, want), (out, want)
mods = sorted(m for m in sys.modules
              if m.startswith("rulec") and not m.startswith(("rulec.runtime", "rulec.backends", "rulec_generated")))
print(json.dumps({"rulec": mods, "yaml": "yaml" in sys.modules, "egglog": "egglog" in sys.modules}))
"""


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute name a relative `from ... import` in runtime module `module` refers to."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")[:-node.level]  # a module's own package is one level up
    return ".".join(parts + ([node.module] if node.module else []))


def runtime_imports() -> list[tuple[str, str, int]]:
    """(runtime file, imported module, line) for every import in the runtime package."""
    out = []
    for path in sorted(RUNTIME.rglob("*.py")):
        rel = path.relative_to(RUNTIME).with_suffix("")
        module = ".".join(("rulec", "runtime", *rel.parts))
        if rel.name == "__init__":
            module += ".__init__"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(f"{rel}.py", a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                out.append((f"{rel}.py", _absolute(module, node), node.lineno))
    return out


def test_no_runtime_module_imports_the_compiler():
    """Anything of the `rulec` package outside its runtime, backends and rules subpackages is the compiler (or
    the CLI); the package root is the one exception: the runtime finds the version and the rebuild hook there."""
    imports = runtime_imports()
    assert len(imports) > 50  # the walk saw the runtime
    bad = [f"runtime/{f}:{line} imports {m}" for f, m, line in imports
           if m.startswith("rulec.") and not m.startswith(("rulec.runtime", "rulec.backends", "rulec.rules"))]
    assert bad == []
    yaml_users = {f for f, m, _ in imports if m.split(".")[0] == "yaml"}
    # only to refresh the JSON caches of the op table and of data files (backends) when one changed
    assert yaml_users == {"ir/ops.py", "resources.py"}


def _run(env: dict[str, str]) -> dict:
    res = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh_cache(tmp_path) -> dict[str, str]:
    env = {**os.environ, "RULEC_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RULEC_TRACE", None)
    return env


def test_scheduling_and_running_import_no_compiler_and_no_yaml(fresh_cache):
    first = _run(fresh_cache)  # an empty cache: the runtime has the compiler build rulec's rules first
    if not (artifacts.prebuilt_dir() / artifacts.MANIFEST).exists():  # (unless a wheel's prebuilt build is here)
        assert "rulec.build" in first["rulec"] and "rulec.parse" in first["rulec"]
    second = _run(fresh_cache)  # a current build: the artifacts alone
    assert second == {"rulec": ["rulec"], "yaml": False, "egglog": False}


def test_a_changed_generator_input_is_rebuilt_with_the_compiler(fresh_cache, monkeypatch):
    if (artifacts.prebuilt_dir() / artifacts.MANIFEST).exists():
        pytest.skip("a prebuilt build in the checkout is used instead of the user cache")
    _run(fresh_cache)
    monkeypatch.setenv("RULEC_CACHE_DIR", fresh_cache["RULEC_CACHE_DIR"])
    build = artifacts.default_build_dir(artifacts.default_sources())
    manifest_path = build / artifacts.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["generator"] = "0" * 64  # as if emit_python.py had changed since this build
    manifest_path.write_text(json.dumps(manifest))
    again = _run(fresh_cache)
    assert "rulec.build" in again["rulec"]
    assert artifacts.read_manifest(build)["generator"] == artifacts.generator_sha256()


def test_a_stale_build_without_a_compiler_is_a_clear_error(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.yaml").write_text("k:\n  - name: r\n    match: x + 0\n    rewrite: x\n")
    monkeypatch.setattr(artifacts, "_rebuilder", None)
    with pytest.raises(artifacts.StaleBuildError, match="no compiler is available"):
        rulec.load(src, build_dir=tmp_path / "out")


# ------------------------------------------------------------------ layers inside the runtime

# Each subpackage may import only from the layers below it: the IR knows nothing of engines, the engines
# nothing of the scheduler, the scheduler nothing of kernel lowering or the Tensor frontend. `resources`
# (where files live) and `device` (device names) sit just above the standard library, `buffers` (device
# memory) just above the IR. The backends (rulec.backends) sit between codegen and the Tensor frontend.
LAYERS = {"resources": 0, "device": 0, "ir": 1, "buffers": 2, "engine": 3, "interpret": 3, "schedule": 4,
          "codegen": 5, "tensor": 6}


def _layer(module: str) -> str:
    part = module.removeprefix("rulec.runtime.").split(".")[0]
    return part if part in LAYERS else "top"


def runtime_import_graph() -> dict[str, set[str]]:
    """module -> the runtime modules it imports (at any depth of the file; `if TYPE_CHECKING:` aside)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        rel = path.relative_to(RUNTIME).with_suffix("")
        module = ".".join(("rulec", "runtime", *rel.parts)).removesuffix(".__init__")
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("rulec.runtime"):
                deps |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("rulec.runtime")}
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                raise AssertionError(f"{path}: relative import; the runtime spells its imports in full")
        graph[module] = deps
    # `from rulec.runtime import buffers` names the root package too, whose __init__ holds only a docstring
    return {m: {d for d in ds if d in graph and d not in (m, "rulec.runtime")} for m, ds in graph.items()}


def test_runtime_layers_import_only_downward():
    graph = runtime_import_graph()
    up = [f"{m} -> {d}" for m, ds in graph.items() for d in ds
          if _layer(m) != "top" and (_layer(d) == "top" or LAYERS[_layer(d)] > LAYERS[_layer(m)]
                                     or (_layer(d) != _layer(m) and LAYERS[_layer(d)] == LAYERS[_layer(m)]))]
    assert up == []


def test_only_the_tensor_frontend_imports_the_backends():
    # kernel_text, the C-like printer the interpreter's error notes use, renders nothing and runs nothing
    offenders = []
    for path in sorted(RUNTIME.rglob("*.py")):
        rel = path.relative_to(RUNTIME)
        if rel.parts[0] == "tensor":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            offenders += [f"{rel}: {n}" for n in names
                          if n.startswith("rulec.backends") and n != "rulec.backends.kernel_text"]
    assert offenders == []


def test_runtime_has_no_import_cycles():
    graph = runtime_import_graph()
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(m: str, path: list[str]) -> None:  # graphs here are tens of modules: recursion is fine
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []
