"""RuleSet: a loaded, compiled rule set and the two engines that run it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rulec.runtime.engine.egraph import EngineError
from rulec.runtime.engine.matcher import Matcher, RuleInfo
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.ir.uop import UOp




@dataclass
class RuleSet:
    name: str
    doc: str
    matcher: Matcher
    egglog_path: Path | None = None
    has_callbacks: bool = False
    egglog_skipped: list[tuple[str, str]] = field(default_factory=list)
    # the program's sha256 as the build recorded it: the egglog engine refuses a file that no longer matches
    egglog_sha256: str | None = None

    @property
    def rules(self) -> list[RuleInfo]:
        return self.matcher.rules

    def __add__(self, other: RuleSet) -> RuleSet:
        """Both rule sets, this one's rules first (Python engine only)."""
        if not isinstance(other, RuleSet):
            return NotImplemented  # `rs + 5`: Python's TypeError, naming both types
        return RuleSet(f"{self.name}+{other.name}", self.doc, self.matcher + other.matcher, None,
                       self.has_callbacks or other.has_callbacks)

    def rewrite(self, graph: UOp, engine: str = "python", ctx: Any = None, bottom_up: bool = False,
                **options: Any) -> UOp:
        """Rewrite `graph` to a fixed point with the generated matcher, or with egglog."""
        if not isinstance(graph, UOp):
            raise TypeError(f"the graph to rewrite must be a UOp, not {type(graph).__name__}")
        if engine == "python":
            if options:  # the egglog engine's options would be silently ignored here
                raise TypeError(f"the python engine takes no option {', '.join(map(repr, options))} "
                                f"(those are the egglog engine's)")
            return graph_rewrite(graph, self.matcher, ctx=ctx, bottom_up=bottom_up, name=self.name)
        if engine == "egglog":
            from rulec.runtime.engine.egraph import run_egglog

            if self.egglog_path is None:
                raise EngineError(self._why_no_egglog())
            return run_egglog(self, graph, **options)
        raise ValueError(f"unknown engine {engine!r}: use 'python' or 'egglog'")

    def _why_no_egglog(self) -> str:
        if self.egglog_skipped:  # the build wrote no program: not one rule could run on egglog
            why = "; ".join(f"{n}: {reason}" for n, reason in self.egglog_skipped[:3])
            more = f" (and {len(self.egglog_skipped) - 3} more)" if len(self.egglog_skipped) > 3 else ""
            return (f"rule set {self.name} has no egglog program: none of its rules can run on the egglog "
                    f"engine ({why}{more})")
        if not self.rules:
            return f"rule set {self.name} has no egglog program: it has no rules"
        return f"rule set {self.name} has no egglog program (composed with + at run time?)"

    def __repr__(self) -> str:
        return f"<RuleSet {self.name}: {len(self.rules)} rules>"
