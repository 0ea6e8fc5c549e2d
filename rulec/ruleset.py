"""RuleSet lives in the runtime (rulec.runtime.ruleset): a loaded rule set needs no compiler."""
from rulec.runtime.ruleset import EngineError, RuleSet

__all__ = ["EngineError", "RuleSet"]
