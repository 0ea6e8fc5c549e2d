"""rulec.load() lives in the runtime (rulec.runtime.engine.loading): loading a current build needs no compiler."""
from rulec.runtime.engine.artifacts import RuleSetNotFound, StaleBuildError
from rulec.runtime.engine.loading import load

__all__ = ["load", "RuleSetNotFound", "StaleBuildError"]
