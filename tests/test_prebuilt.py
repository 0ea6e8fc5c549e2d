"""The build a wheel ships: relocatable, used when it matches the installed rule files, never written to."""
from __future__ import annotations

import json

import pytest

from rulec.build import build_prebuilt
from rulec.runtime.engine import artifacts


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("prebuilt") / "_prebuilt"
    build_prebuilt(out)
    return out


@pytest.fixture
def fresh_shipped(monkeypatch, prebuilt, tmp_path):
    monkeypatch.setattr(artifacts, "_shipped_build", [])
    monkeypatch.setattr(artifacts, "_shipped", {})
    monkeypatch.setattr(artifacts, "prebuilt_dir", lambda: prebuilt)
    monkeypatch.setenv("RULEC_CACHE_DIR", str(tmp_path / "cache"))
    return prebuilt


def _listing(folder):
    return sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())


def test_a_prebuilt_build_keys_sources_relative_to_the_rules_folder(prebuilt):
    raw = json.loads((prebuilt / artifacts.MANIFEST).read_text())
    assert raw["root"] == artifacts.RELOCATABLE_ROOT
    assert "schedule/rangeify.yaml" in raw["sources"] and not any(k.startswith("/") for k in raw["sources"])
    assert raw["rulesets"]["rangeify"]["file"] == "schedule/rangeify.yaml"
    # read back, its keys are this install's absolute paths, and it is current
    build, problem = artifacts._current(prebuilt, artifacts.default_sources())
    assert build is not None, problem
    assert any(p.name.endswith(".code") for p in prebuilt.iterdir())  # bytecode shipped beside the matchers


def test_the_scheduler_uses_a_current_prebuilt_build_and_writes_nothing(fresh_shipped, tmp_path):
    before = _listing(fresh_shipped)
    assert artifacts.shipped_build().out == fresh_shipped
    assert artifacts.shipped_ruleset("index_symbolic").matcher.rules
    assert _listing(fresh_shipped) == before and not (tmp_path / "cache").exists()


def test_a_stale_prebuilt_build_is_left_alone_and_the_user_cache_is_built(fresh_shipped, tmp_path):
    manifest = fresh_shipped / artifacts.MANIFEST
    saved = manifest.read_text()
    data = json.loads(saved)
    data["generator"] = "0" * 64  # made by other code generators than this install's
    manifest.write_text(json.dumps(data))
    try:
        before = _listing(fresh_shipped)
        build = artifacts.shipped_build()
        assert build.out == artifacts.default_build_dir(artifacts.default_sources())
        assert build.out.is_relative_to(tmp_path / "cache")
        assert artifacts.shipped_ruleset("index_symbolic").matcher.rules
        assert _listing(fresh_shipped) == before
    finally:
        manifest.write_text(saved)


def test_prebuilt_rule_locations_name_the_package_not_the_build_folder(prebuilt):
    text = (prebuilt / "symbolic.py").read_text()
    assert "'rules/symbolic.yaml', " in text and str(prebuilt.parent) not in text
    files = {json.loads(p.read_text())["file"] for p in prebuilt.glob("pipeline-*.json")}
    assert "rules/schedule/pipeline.yaml" in files


def test_bytecode_missing_from_a_prebuilt_build_is_compiled_in_memory_never_written(fresh_shipped):
    for cache in fresh_shipped.glob(".index_divmod-*.code"):  # as on a Python the wheel was not built for
        cache.unlink()
    before = _listing(fresh_shipped)
    assert artifacts.shipped_ruleset("index_divmod").matcher.rules
    assert _listing(fresh_shipped) == before
    code = artifacts.shipped_ruleset("symbolic").matcher.entries[0][2].__code__
    assert code.co_filename == str(fresh_shipped / "symbolic.py")  # shipped bytecode names where it is now
