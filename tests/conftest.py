"""Shared fixtures: compile a rule file written inline in a test."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from rulec.build import build
from rulec.diagnostics import CompileError
from rulec.loader import load


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    # tests must not read or write the user's build cache
    os.environ["RULEC_CACHE_DIR"] = str(tmp_path_factory.mktemp("rulec-cache"))
    yield


class RuleWriter:
    """Writes rule text to a file in a temp folder and compiles or checks it."""

    def __init__(self, root: Path):
        self.root = root
        self.count = 0

    def write(self, text: str, name: str | None = None) -> Path:
        self.count += 1
        path = self.root / (name or f"rules{self.count}.yaml")
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    def load(self, text: str, name: str | None = None, ruleset: str | None = None):
        path = self.write(text)
        return load(path, name=ruleset or name, build_dir=self.root / f"build{self.count}")

    def errors(self, text: str) -> list:
        """The diagnostics of a rule file that must fail to compile."""
        path = self.write(text)
        with pytest.raises(CompileError) as info:
            build([path], self.root / f"build{self.count}")
        return info.value.diagnostics

    def warnings(self, text: str) -> list:
        path = self.write(text)
        res = build([path], self.root / f"build{self.count}")
        return res.project.warnings


@pytest.fixture
def rules(tmp_path, monkeypatch) -> RuleWriter:
    monkeypatch.chdir(tmp_path)
    return RuleWriter(tmp_path)


def pytest_terminal_summary(terminalreporter) -> None:
    # create_schedule runs the kernel-AST checker (runtime/schedule/kernel_check.py) on every kernel it makes and
    # raises on an unsafe one; say how many this run checked (per process under xdist: none shown there)
    from rulec.runtime.schedule import kernel_check

    if kernel_check.checked:
        terminalreporter.write_line(f"kernel-AST check: {kernel_check.checked} scheduled kernels checked "
                                    "(no load of a stored buffer at another index, every index within its buffer, "
                                    "no buffer bound twice)")
