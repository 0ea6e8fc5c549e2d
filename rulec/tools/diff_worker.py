"""The half of `rulec diff` that runs in a subprocess, under one revision of the rules.

    RULEC_RULES_DIR=FOLDER python -m rulec.tools.diff_worker --out FILE.json PROG...

runs each PROG with a trace (counts and times only) and a realize watcher, and writes one JSON document:
every rule the pipelines hold with its hits and tries summed over the programs, each stage's runs, hits and
time, and per program the kernels it ran, in schedule order, with their C source. A subprocess because the
rules folder is fixed once per process (`rules_dir()` reads RULEC_RULES_DIR once, builds are cached).

Exit status: 0 written; 1 a program failed (its status is in the document); 2 unusable rules or a missing
program (one `rulec: error:` line; a rule file's diagnostics before it).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rulec.tools.stats import render_all

FORMAT = "rulec-diff-run"


class KernelRecorder:
    """A realize watcher: each kernel of each realize, in schedule order, with its C source. The other
    languages are rendered too (not kept) so the GPU lowering rules count, as in `rulec stats`."""

    def __init__(self) -> None:
        self.kernels: list[dict[str, Any]] = []
        self._sources: dict[Any, str] = {}

    def before_realize(self, tensors: tuple[Any, ...]) -> None:
        pass

    def after_realize(self, tensors: tuple[Any, ...], items: list[Any]) -> None:
        from rulec.backends.render import kernel_name

        for item in items:
            if item.is_copy:
                continue  # a copy between devices: no kernel code
            src = self._sources.get(item.ast)
            if src is None:
                src = self._sources[item.ast] = render_all(item)
            self.kernels.append({"name": kernel_name(item.ast), "device": item.device, "source": src})


def rule_file(file: str, root: Path) -> str:
    """A rule's file relative to the rules folder, so the same rule has the same place in both revisions."""
    try:
        return Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        # a wheel's prebuilt artifacts name files relative to the package: rules/symbolic.yaml
        return file[len("rules/"):] if file.startswith("rules/") else file


def rule_id(info: Any) -> str:
    return f"{info.ruleset}/{info.name}"


def collect(programs: list[str]) -> tuple[dict[str, Any], int]:
    """Run the programs; the document and the exit status (1 when a program failed: it stops there)."""
    from rulec.runtime.resources import rules_dir
    from rulec.runtime.tensor import realize
    from rulec.tools.program import run_traced
    from rulec.tools.stats import pipeline_rules

    root = rules_dir().resolve()
    rules: dict[str, dict[str, Any]] = {}

    def entry(info: Any) -> dict[str, Any]:
        key = rule_id(info)
        if key not in rules:
            rules[key] = {"id": key, "ruleset": info.ruleset, "name": info.name, "file": rule_file(info.file, root),
                          "line": info.line, "kind": info.kind, "hits": 0, "tries": 0, "seconds": 0.0}
        return rules[key]

    for info in pipeline_rules():  # every rule, so one that never fires is still in the comparison
        entry(info)
    stages: dict[tuple[str, str], dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    status = 0
    for prog in programs:
        recorder = KernelRecorder()
        realize.WATCHERS.append(recorder)
        try:
            result, trace = run_traced(prog, [], keep_events=False)
        finally:
            realize.WATCHERS.remove(recorder)
        hits: dict[str, int] = {}
        for info, st in trace.stats.items():
            e = entry(info)
            e["hits"] += st.hits
            e["tries"] += st.tries
            e["seconds"] += st.seconds
            if st.hits:
                hits[e["id"]] = hits.get(e["id"], 0) + st.hits
        for rec in trace.stages:
            row = stages.setdefault((rec.pipeline, rec.name), {"pipeline": rec.pipeline, "name": rec.name,
                                                               "runs": 0, "hits": 0, "seconds": 0.0})
            row["runs"] += 1
            row["hits"] += rec.hits + getattr(rec, "facts", 0)  # facts recorded count as hits, as in `rulec stats`
            row["seconds"] += rec.seconds
        runs.append({"program": prog, "status": result.status, "kernels": recorder.kernels, "hits": hits})
        if result.status != 0:
            status = 1
            break
    doc = {"format": FORMAT, "version": 1, "rules_dir": str(root), "rules": list(rules.values()),
           "stages": list(stages.values()), "programs": runs}
    return doc, status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rulec.tools.diff_worker")
    p.add_argument("--out", required=True, help="the JSON document to write")
    p.add_argument("programs", nargs="+")
    args = p.parse_args(argv)
    from rulec.tools.program import ProgramNotFound

    missing = [prog for prog in args.programs if not Path(prog).is_file()]
    if missing:
        print(f"rulec: error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    try:
        doc, status = collect(args.programs)
    except ProgramNotFound as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # rule files that do not compile, a broken rules folder: the message is the answer
        from rulec.diagnostics import CompileError

        if isinstance(e, CompileError):
            for d in e.diagnostics:
                print(d.render(), file=sys.stderr)
            n = sum(d.severity == "error" for d in e.diagnostics)
            print(f"rulec: error: its rule files do not compile ({n} error(s))", file=sys.stderr)
        else:
            print(f"rulec: error: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(doc), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
