"""The pipeline file, compiled: a JSON artifact the scheduler runs without a YAML parser or the checker.

It holds what `rulec.runtime.engine.pipeline.Pipeline.from_artifact` needs and nothing the checker alone uses:
stages in order (rule sets, traversal, engine, context, result, or a Python step), the contexts' factories,
the rule sets the stages' Python runs itself (`matchers`), and each stage's `file:line:col` for messages and
traces.
"""
from __future__ import annotations

import json

from .pipeline_check import PipelineSpec

ARTIFACT_FORMAT = 3  # 2: per-stage engine, `matchers`; 3: `when_graph_has`


def emit_pipeline(spec: PipelineSpec) -> str:
    data = {
        "_generated_by": "rulec",  # first (keys are sorted): how a build knows the file is its own
        "format": ARTIFACT_FORMAT,
        "file": spec.path,
        "contexts": {name: c.factory for name, c in spec.contexts.items()},
        "matchers": list(spec.matchers),
        "stages": [{"name": s.name, "rules": list(s.rules), "bottom_up": s.bottom_up, "context": s.context,
                    "keep_result": s.keep_result, "call": s.call, "engine": s.engine, "loc": str(s.loc),
                    "when_graph_has": list(s.when_graph_has)}
                   for s in spec.stages],
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
