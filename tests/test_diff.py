"""`rulec diff OLD NEW PROG...` (issue 10 §3): two revisions of the rules compared over programs."""
from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from rulec.runtime.resources import rules_dir
from rulec.runtime.tensor import realize
from rulec.tools.diff import add_parser
from rulec.tools.diff_worker import KernelRecorder
from rulec.tools.program import run_program

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "scripts"
TINY, PADDED = str(SCRIPTS / "tiny.py"), str(SCRIPTS / "padded.py")

# a program whose explicit .contiguous() is a kernel of its own: without realize-explicit it fuses away
CONTIG = """\
import numpy as np
from rulec import Tensor
x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print(((x + 1).contiguous() * 2).sum(1).numpy().tolist())
"""


def diff(*argv: str) -> int:
    """The command as `rulec diff ...` runs it (cli.py wires the same add_parser)."""
    parser = argparse.ArgumentParser(prog="rulec")
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["diff", *argv])
    return args.func(args)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer holds {old!r}: pick another rule for this test"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def revisions(tmp_path_factory) -> tuple[Path, Path, str]:
    """OLD: a copy of rulec's rules; NEW: the same with symbolic/add-zero and realize-explicit switched off."""
    tmp = tmp_path_factory.mktemp("diff")
    old, new = tmp / "old", tmp / "new"
    shutil.copytree(rules_dir(), old)
    shutil.copytree(rules_dir(), new)
    _edit(new / "symbolic.yaml", "    - name: add-zero\n", "    - name: add-zero\n      enabled: false\n")
    _edit(new / "schedule" / "realize.yaml", "    - name: realize-explicit\n",
          "    - name: realize-explicit\n      enabled: false\n")
    contig = tmp / "contig.py"
    contig.write_text(CONTIG)
    return old, new, str(contig)


def test_a_disabled_rule_is_named_with_its_hits_and_the_kernels_that_changed(revisions, capsys):
    old, new, contig = revisions
    assert diff(str(old), str(new), TINY, PADDED, contig, "--max-lines", "0") == 1
    out = capsys.readouterr().out
    assert diff(str(old), str(new), TINY, PADDED, contig, "--json") == 1
    cmp = json.loads(capsys.readouterr().out)

    only_old = {r["id"]: r for r in cmp["rules"]["only_old"]}
    assert set(only_old) == {"symbolic/add-zero", "realize_marks/realize-explicit"}
    assert not cmp["rules"]["only_new"]
    assert cmp["rules"]["old"] == cmp["rules"]["new"] + 2
    zero = only_old["symbolic/add-zero"]
    assert zero["hits"] > 0 and zero["loc"].startswith("symbolic.yaml:")
    assert f"symbolic/add-zero  {zero['loc']}  hits {zero['hits']}" in out

    # fusing the contiguous away changes what later rules see: their counts are listed, largest change first
    changed = cmp["rules"]["changed"]
    assert changed and all(c["old"] != c["new"] and c["change"] == c["new"] - c["old"] for c in changed)
    assert [abs(c["change"]) for c in changed] == sorted((abs(c["change"]) for c in changed), reverse=True)
    top = changed[0]
    assert f"{top['old']:>6} -> {top['new']:<6} ({top['change']:+d})  {top['loc']}" in out

    progs = {Path(p["program"]).name: p for p in cmp["programs"]}
    assert progs["contig.py"]["new_kernels"] < progs["contig.py"]["old_kernels"]
    assert progs["tiny.py"]["new_kernels"] == progs["tiny.py"]["old_kernels"]
    c = progs["contig.py"]
    assert f"contig.py: {c['old_kernels']} -> {c['new_kernels']}   changed" in out
    assert f"tiny.py: {progs['tiny.py']['old_kernels']} -> {progs['tiny.py']['old_kernels']}\n" in out

    # the OLD counts are those of an ordinary run of the same program under the same rules
    recorder = KernelRecorder()
    realize.WATCHERS.append(recorder)
    try:
        assert run_program(TINY).status == 0
    finally:
        realize.WATCHERS.remove(recorder)
    assert len(recorder.kernels) == progs["tiny.py"]["old_kernels"]

    # code: without add-zero a `0+` survives in tiny's reduce kernel; a removed kernel diffs against nothing
    code = cmp["code"]
    assert f"kernel code changed: {len(code)} kernel(s)" in out
    tiny = [k for k in code if k["program"] == TINY]
    assert tiny and any(line.startswith("+") and "(0+" in line for k in tiny for line in k["diff"])
    assert any(k["program"] == contig and k["new_index"] is None and k["diff"][1] == "+++ NEW /dev/null"
               for k in code)
    assert f"--- OLD {TINY} kernel #{tiny[0]['old_index'] + 1} {tiny[0]['old_name']}" in out


def test_max_lines_cuts_each_code_diff(revisions, capsys):
    old, new, _ = revisions
    assert diff(str(old), str(new), TINY, "--max-lines", "3", "--context", "0") == 1
    out = capsys.readouterr().out
    assert "more line(s) (--max-lines)" in out
    head = out[out.index("kernel code changed"):].splitlines()[1:4]
    assert head[0].startswith("--- OLD") and head[1].startswith("+++ NEW") and head[2].startswith("@@")


def test_the_same_rules_exit_0_and_a_git_revision_is_a_revision(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    if subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    # HEAD's rules/ as a folder (the working tree's may hold uncommitted edits)
    tar = subprocess.run(["git", "archive", "--format=tar", "HEAD", "rules"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(tmp_path, filter="data")
    assert diff("HEAD", str(tmp_path / "rules"), TINY) == 0
    out = capsys.readouterr().out
    assert "OLD HEAD" in out and "no differences: same rules, same hit counts" in out
    assert re.search(r"tiny\.py: ([1-9]\d*) -> \1\n", out) and "changed" not in out


@pytest.mark.parametrize("old,new,message", [
    ("no-such-revision-or-folder", "HEAD", "no-such-revision-or-folder: neither a rules folder nor a git revision"),
    ("docs", "HEAD", "docs: not a rules folder (needs ops.yaml"),
])
def test_an_unusable_revision_is_one_line_and_exit_2(old, new, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert diff(old, new, TINY) == 2
    err = capsys.readouterr().err
    assert err == f"rulec: error: {err.removeprefix('rulec: error: ')}" and message in err and err.count("\n") == 1


def test_bad_usage_exits_2(revisions, capsys):
    old, _, _ = revisions
    assert diff(str(old), str(old), "missing.py") == 2
    assert capsys.readouterr().err == "rulec: error: missing.py: no such file\n"
    assert diff(str(old), str(old), TINY, "--max-lines", "-1") == 2
    assert "--max-lines" in capsys.readouterr().err


def test_rules_that_do_not_compile_and_a_failing_program_exit_2(revisions, tmp_path, capsys):
    old, _, _ = revisions
    broken = tmp_path / "broken"
    shutil.copytree(old, broken)
    _edit(broken / "symbolic.yaml", "      rewrite: x\n", "      rewrite: (x\n")
    assert diff(str(old), str(broken), TINY) == 2
    err = capsys.readouterr().err
    assert "symbolic.yaml:" in err and "error:" in err  # the diagnostic, with its place
    assert err.splitlines()[-1].startswith(f"rulec: error: {broken}: its rule files do not compile")

    assert diff(str(old), str(old), str(SCRIPTS / "raises.py")) == 2
    err = capsys.readouterr().err
    assert "ValueError: cannot broadcast" in err  # the end of the script's own traceback
    assert err.splitlines()[-1] == f"rulec: error: {SCRIPTS / 'raises.py'} failed under {old} (status 1)"
