"""RuleSet lives in the runtime (rulec.runtime.engine.ruleset): a loaded rule set needs no compiler."""
from rulec.runtime.engine.ruleset import EngineError, RuleSet

__all__ = ["EngineError", "RuleSet"]
