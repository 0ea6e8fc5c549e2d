"""Build folders: manifest, incremental rebuilds, atomic writes, and load()'s staleness policy."""
from __future__ import annotations

import os

import pytest

import rulec
from rulec import build as build_mod
from rulec.build import build, read_manifest
from rulec.loader import RuleSetNotFound, StaleBuildError, load
from rulec.runtime.ir.uop import UOp

BASE = """
base:
  doc: the base set
  rules:
    - name: add-zero
      match: (ADD x 0)
      rewrite: x
"""
TOP = """
top:
  include: [base]
  rules:
    - name: mul-one
      match: (MUL x 1)
      rewrite: x
"""
OTHER = """
other:
  rules:
    - name: sub-zero
      match: (SUB x 0)
      rewrite: x
"""

x = UOp.variable("x", 0, 10)


@pytest.fixture
def project(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "base.yaml").write_text(BASE)
    (src / "top.yaml").write_text(TOP)
    (src / "other.yaml").write_text(OTHER)
    return src


def test_manifest_records_hashes_and_versions(project, tmp_path):
    out = tmp_path / "out"
    build([project], out)
    m = read_manifest(out)
    assert m["rulec"] == rulec.__version__
    assert m["egglog"] == build_mod.egglog_version() != "missing"
    assert set(m["rulesets"]) == {"base", "top", "other"}
    assert all(len(h) == 64 for h in m["sources"].values()) and len(m["sources"]) == 3
    for name, entry in m["rulesets"].items():
        assert (out / entry["python"]).exists() and (out / entry["egglog"]).exists()
    assert m["rulesets"]["top"]["rules"] == 2


def test_incremental_rebuild_touches_only_affected_sets(project, tmp_path):
    out = tmp_path / "out"
    first = build([project], out)
    assert sorted(first.built) == ["base", "other", "top"]
    again = build([project], out)
    assert again.built == [] and sorted(again.reused) == ["base", "other", "top"]
    # top includes base, so editing base rebuilds both, and leaves `other` alone
    (project / "base.yaml").write_text(BASE.replace("add-zero", "add-zero-renamed"))
    third = build([project], out)
    assert sorted(third.built) == ["base", "top"] and third.reused == ["other"]
    assert build([project], out, force=True).reused == []


def test_progress_is_reported_for_every_rule_set(project, tmp_path):
    seen = []
    build([project], tmp_path / "out", progress=lambda name, done, total: seen.append((name, done, total)))
    assert sorted(n for n, _, _ in seen) == ["base", "other", "top"]
    assert [d for _, d, _ in seen] == [1, 2, 3] and {t for _, _, t in seen} == {3}
    seen.clear()
    build([project], tmp_path / "out", progress=lambda name, done, total: seen.append(done))  # all up to date
    assert seen == [1, 2, 3]


def test_atomic_write_leaves_old_file_on_crash(tmp_path, monkeypatch):
    target = tmp_path / "a.py"
    build_mod.atomic_write(target, "old\n")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        build_mod.atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # no temp file left behind


def test_load_rebuilds_after_source_change(project, tmp_path):
    out = tmp_path / "out"
    rs = load(project, name="other", build_dir=out)
    assert rs.rewrite(x - 0) is x
    (project / "other.yaml").write_text(OTHER.replace("(SUB x 0)", "(SUB x 1)"))
    with pytest.raises(StaleBuildError, match="rulec build"):
        load(project, name="other", build_dir=out, rebuild=False)
    rs2 = load(project, name="other", build_dir=out)
    assert rs2.rewrite(x - 1) is x and rs2.rewrite(x - 0) is not x


def test_load_by_file_and_name_suffix(project, tmp_path):
    assert load(project / "other.yaml", build_dir=tmp_path / "o1").name == "other"
    assert load(f"{project}:top", build_dir=tmp_path / "o2").name == "top"
    with pytest.raises(RuleSetNotFound, match="pick one"):
        load(project, build_dir=tmp_path / "o3")


def test_unknown_rule_set_suggests(project, tmp_path):
    with pytest.raises(RuleSetNotFound, match="did you mean top"):
        load(project, name="tpo", build_dir=tmp_path / "o")


def test_included_rules_come_first(project, tmp_path):
    rs = load(project, name="top", build_dir=tmp_path / "o")
    assert [r.name for r in rs.rules] == ["add-zero", "mul-one"]
    assert rs.rules[0].ruleset == "base" and rs.rules[0].file.endswith("base.yaml")
    assert rs.rewrite((x + 0) * 1) is x


def test_runtime_composition_with_plus(project, tmp_path):
    a = load(project, name="base", build_dir=tmp_path / "o")
    b = load(project, name="other", build_dir=tmp_path / "o")
    both = a + b
    assert [r.name for r in both.rules] == ["add-zero", "sub-zero"]
    assert both.rewrite((x - 0) + 0) is x


def test_callbacks_beside_the_rule_file_load_in_a_fresh_process(tmp_path):
    import subprocess
    import sys

    (tmp_path / "local_cb.py").write_text("def neg(x):\n    return -x\n")
    (tmp_path / "r.yaml").write_text("cbset:\n  rules:\n    - name: neg-var\n      match: x@DEFINE_VAR\n"
                                     "      call: local_cb:neg\n")
    build([tmp_path / "r.yaml"], tmp_path / "out")
    code = ("from rulec.loader import load\nfrom rulec.runtime.ir.uop import UOp\n"
            f"rs = load({str(tmp_path / 'r.yaml')!r}, build_dir={str(tmp_path / 'out')!r})\n"
            "x = UOp.variable('x', 0, 3)\nassert rs.matcher.dispatch[x.op][0][1](x, None) is -x\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr


def test_included_sets_are_composed_at_load_not_emitted_again(tmp_path):
    """A set's module holds its own rules; the loader composes the included sets' matchers in the order the
    compiler gives the rules (included sets first, depth first, each once), so `symbolic` is emitted once."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "base.yaml").write_text(BASE)
    (src / "top.yaml").write_text(TOP)
    (src / "diamond.yaml").write_text("""
left:
  include: [base]
  rules:
    - {name: sub-zero, match: (SUB x 0), rewrite: x}
both:
  include: [left, top]
  rules:
    - {name: max-self, match: (MAX x x), rewrite: x}
""")
    out = tmp_path / "out"
    res = build([src], out)
    assert "add-zero" not in (out / "top.py").read_text() and "add-zero" in (out / "base.py").read_text()
    for name in ("top", "both"):
        want = [r.name for r in res.project.rules_of(name)]
        assert [r.name for r in load(src, name=name, build_dir=out).rules] == want
    assert [r.name for r in load(src, name="both", build_dir=out).rules] == ["add-zero", "sub-zero", "mul-one",
                                                                              "max-self"]
    rs = load(src, name="top", build_dir=out)
    assert rs.matcher.name == "top" and rs.rewrite((x + 0) * 1) is x


def test_artifacts_the_new_build_no_longer_has_are_removed(project, tmp_path):
    out = tmp_path / "out"
    build([project], out)
    assert (out / "other.py").exists() and (out / "other.egg").exists()
    (out / "mine.txt").write_text("not rulec's")
    (project / "other.yaml").unlink()
    build([project], out)
    assert not (out / "other.py").exists() and not (out / "other.egg").exists()
    assert (out / "mine.txt").exists() and (out / "top.py").exists()
