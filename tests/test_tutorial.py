"""docs/tutorial.md runs as written: its blocks, in order, in an empty folder (the rules are stated at the
top of the tutorial)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((ROOT / "docs" / "tutorial.md").read_text())]


def test_the_tutorial_has_every_part():
    kinds = [k for k, _ in blocks()]
    assert kinds.count("sh") >= 5 and kinds.count("text") >= 4 and "yaml" in kinds and "python" in kinds
    commands = " ".join(b for k, b in blocks() if k == "sh")
    for tool in ("rulec build", "rulec trace", "rulec viz", "rulec explain"):
        assert tool in commands


def test_the_tutorial_runs(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "RULEC_CACHE_DIR": str(tmp_path / "cache")}
    last_output = None
    for kind, text in blocks():
        first = text.splitlines()[0] if text.strip() else ""
        name = re.fullmatch(r"# ([\w.]+)", first)
        if kind in ("yaml", "python") and name:
            (tmp_path / name.group(1)).write_text(text)
        elif kind == "python":
            done = subprocess.run([sys.executable, "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"python block failed:\n{text}\n{done.stderr}"
        elif kind == "sh":
            last_output = ""
            for line in filter(None, (ln.split("  #")[0].strip() for ln in text.splitlines())):
                argv = shlex.split(line)
                assert argv[0] == "rulec"
                done = subprocess.run([sys.executable, "-m", "rulec.cli", *argv[1:]], cwd=tmp_path, env=env,
                                      capture_output=True, text=True)
                assert done.returncode == 0, f"`{line}` failed:\n{done.stdout}\n{done.stderr}"
                last_output += done.stdout + done.stderr
        elif kind == "text":
            assert last_output is not None, "a text block must follow a sh block"
            got = [" ".join(ln.split()) for ln in last_output.splitlines()]
            for want in text.splitlines():
                want = " ".join(want.split())
                if want and "…" not in want:
                    assert any(want in g for g in got), f"{want!r} is not in the output:\n{last_output}"
                elif want:
                    prefix = want.split("…")[0].strip()
                    assert any(g.startswith(prefix) for g in got), f"{prefix!r}… is not in the output:\n{last_output}"
    assert (tmp_path / "simplify.html").stat().st_size > 10_000
