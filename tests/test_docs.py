"""Every example in docs/rules.md compiles and behaves as the text says."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from rulec.loader import load
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```yaml\n(.*?)```\s*```python\n(.*?)```", re.S)


def examples() -> list[tuple[str, str, str]]:
    text = (DOCS / "rules.md").read_text()
    out = []
    for m in BLOCK.finditer(text):
        name = next(iter(re.findall(r"^(\w+):", m.group(1), re.M)), "example")
        out.append((name, m.group(1), m.group(2)))
    return out


def test_every_construct_has_an_example():
    assert len(examples()) >= 11


@pytest.mark.parametrize("name,yaml_text,py_text", examples(), ids=[e[0] for e in examples()])
def test_doc_example(name, yaml_text, py_text, tmp_path, monkeypatch):
    shutil.copy(DOCS / "docs_callbacks.py", tmp_path / "docs_callbacks.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "example.yaml"
    path.write_text(yaml_text)
    last = re.findall(r"^(\w+):", yaml_text, re.M)[-1]
    rs = load(path, name=last, build_dir=tmp_path / "build")
    env = {"rs": rs, "UOp": UOp, "Ops": Ops, "dtypes": dtypes,
           "x": UOp.variable("x", 0, 10), "y": UOp.variable("y", 0, 10)}
    exec(compile(py_text, f"docs/rules.md:{name}", "exec"), env)


def test_helper_list_matches_the_registries():
    """docs/rules.md names every helper a rule expression may call, and no other."""
    from rulec.runtime.engine.helpers import HELPERS
    from rulec.runtime.schedule.helpers import SCHEDULE_HELPERS

    text = (DOCS / "rules.md").read_text()
    start = text.index("* calls of the registered helpers only")
    listed = set()
    for span in re.findall(r"`([^`]*)`", text[start:text.index("\n* ", start + 1)]):
        listed |= set(span.split()) if " " in span else set()
    assert listed == set(HELPERS) | set(SCHEDULE_HELPERS)
