"""rulec.load() lives in the runtime (rulec.runtime.loading): loading a current build needs no compiler."""
from rulec.runtime.artifacts import RuleSetNotFound, StaleBuildError
from rulec.runtime.loading import load

__all__ = ["load", "RuleSetNotFound", "StaleBuildError"]
