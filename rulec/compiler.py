"""The front half of the compiler: read rule files, parse them, check them."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rulec.runtime.engine.artifacts import rule_files

from .callback_check import verify_import
from .check import check
from .diagnostics import CompileError, Diagnostic, Reporter
from .model import Rule, RuleFile, RuleSetDef
from .optable_check import check_op_table, is_op_table
from .parse import parse_file
from .pipeline_check import PipelineSpec, is_pipeline_file, read_pipeline
from .reading import SourceError, read_source


@dataclass
class Project:
    """Every rule set of a group of rule files, checked."""

    files: list[Path]
    sources: dict[str, str]  # path -> text
    rulesets: dict[str, RuleSetDef]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    pipelines: dict[Path, PipelineSpec] = field(default_factory=dict)  # pipeline file -> its checked stages

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    def rules_of(self, name: str) -> list[Rule]:
        return self.rulesets[name].all_rules(self.rulesets)

    def disabled_rules_of(self, name: str) -> list[Rule]:
        """The rules of the set (and its includes) switched off with `enabled: false`: checked, not compiled."""
        return [r for r in self.rulesets[name].all_rules(self.rulesets, include_disabled=True) if not r.enabled]

    def closure(self, name: str) -> list[str]:
        """The rule set and everything it includes, transitively."""
        out: list[str] = []
        stack = [name]
        while stack:
            n = stack.pop()
            if n in out or n not in self.rulesets:
                continue
            out.append(n)
            stack.extend(i for i, _ in self.rulesets[n].include)
        return out


def display_path(p: Path) -> str:
    """Paths in diagnostics: relative to the working directory when below it."""
    try:
        # realpath, unlike Path.resolve, accepts a symlink loop (that file's error is that it can't be read)
        return str(Path(os.path.realpath(p)).relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def compile_project(paths: list[str | Path], import_callbacks: bool = False,
                    texts: dict[str, str] | None = None) -> Project:
    """Parse and check rule files, pipeline files and the op table; raises CompileError listing every error
    (warnings ride along).

    `texts` adds rule files given as text, by the name diagnostics show (`<stdin>`: `rulec check -`); their
    callback modules are looked up beside the working directory. Checking reads callback modules' source
    and runs none of their code; `import_callbacks=True` (the build) then imports them and verifies that
    each named function is defined in its module.
    """
    files = rule_files(paths)
    rep = Reporter()
    sources: dict[str, str] = {}
    parsed: list[RuleFile] = []
    pipelines: dict[Path, PipelineSpec] = {}
    for name, text in (texts or {}).items():
        sources[name] = text
        try:
            parsed.append(parse_file(name, text, rep))
        except CompileError as e:
            rep.diagnostics.extend(e.diagnostics)
    for f in files:
        name = display_path(f)
        try:
            text = read_source(f, name)
        except SourceError as e:
            rep.error(e.loc, str(e))
            continue
        sources[name] = text
        try:
            if is_op_table(f):
                check_op_table(name, text, rep)
            elif is_pipeline_file(f):
                pipeline = read_pipeline(name, text, rep)
                if pipeline is not None:
                    pipelines[f] = pipeline
            else:
                parsed.append(parse_file(name, text, rep))
        except CompileError as e:
            rep.diagnostics.extend(e.diagnostics)
    table = check(parsed, rep)
    if import_callbacks and not rep.errors:
        _import_callbacks(parsed, list(pipelines.values()), rep)
    if rep.errors:
        err = CompileError(rep.errors)
        err.diagnostics = rep.diagnostics  # keep warnings too, errors first when rendered by the CLI
        raise err
    return Project(files, sources, table, rep.diagnostics, pipelines)


def _import_callbacks(files: list[RuleFile], pipelines: list[PipelineSpec], rep: Reporter) -> None:
    """Import every callback module once (this runs its code) and verify each named function."""
    seen: set[tuple[str, str]] = set()
    for f in files:
        for rs in f.rulesets:
            for rule in rs.rules:
                spec = rule.call
                if spec is not None and spec.scope is not None and (spec.module, spec.function) not in seen:
                    seen.add((spec.module, spec.function))
                    verify_import(spec.module, spec.function, spec.scope, spec.loc, rep)
    for p in pipelines:
        for ref, loc in p.callback_refs():
            module, _, function = ref.partition(":")
            if (module, function) not in seen:
                seen.add((module, function))
                verify_import(module, function, p.callbacks, loc, rep)
