"""The Python rewrite engine: rewrite a UOp DAG to a fixed point under a rule set.

Two traversals, named as in the seed (the SINK is the *bottom* of the graph):
  bottom_up=False  sources first: a node is matched after its sources are final,
                   and a rewritten node is processed again until nothing matches.
  bottom_up=True   sink first: a node is rewritten to a fixed point before the
                   walk descends into the sources of the result.
Results are memoized over the DAG, so a shared node is rewritten once.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from rulec.runtime.engine.genlib import FACT_RECORDED
from rulec.runtime.engine.matcher import Matcher, RuleFailed, RuleInfo, rule_error
from rulec.runtime.engine.trace import active_trace
from rulec.runtime.ir.uop import UOp, op_mask


class RewriteNotReady(Exception):
    """Raised by a callback that cannot decide yet; the node is revisited after the rest of the graph."""


class RewriteError(RuntimeError):
    """A rule set misbehaved: it did not terminate, or a callback never became ready."""


class HasMatcher(Protocol):
    matcher: Matcher


# A single node may be rewritten this many times in a row before we look for a cycle.
NODE_STEP_LIMIT = 1000
# A whole rewrite may take this many steps, or 100 per node of the graph if that is more.
STEP_FLOOR = 100_000


def _as_matcher(rules: Matcher | HasMatcher) -> Matcher:
    return rules if isinstance(rules, Matcher) else rules.matcher


class _Rewriter:
    def __init__(self, rules: Matcher | HasMatcher, ctx: Any, bottom_up: bool, name: str | None):
        if not isinstance(rules, Matcher) and not isinstance(getattr(rules, "matcher", None), Matcher):
            raise TypeError(f"rules must be a Matcher or a loaded rule set, not {type(rules).__name__}")
        self.matcher = _as_matcher(rules)
        self.dispatch = self.matcher.dispatch
        self.fast = self.matcher.fast
        # the ops some rule is rooted at: a node with none of them at or below it is final as it is, so the
        # walk takes it whole without visiting its sources (most of a graph, for a stage of a few rules)
        self.rooted = op_mask(*self.fast)
        self.ctx = ctx
        self.bottom_up = bottom_up
        self.name = name or self.matcher.name
        self.replace: dict[UOp, UOp] = {}
        self.trace = active_trace()
        if self.trace is not None:
            self.trace.register(self.matcher.rules)
        self.steps = 0
        self.step_limit = STEP_FLOOR
        self.root: UOp | None = None  # the graph the limit is taken from, until it is
        # what each node was rewritten to, and by which rule, to explain cycles (two dicts: a tuple per
        # step would be one more tracked object per rewrite for the garbage collector)
        self.rewrote: dict[UOp, UOp] = {}
        self.rewrote_by: dict[UOp, int] = {}
        # the rule whose callback raised RewriteNotReady last, and per deferred node the one that did
        self.not_ready_rule = -1
        self.not_ready: dict[UOp, int] = {}

    # -- one rewrite at the root of one node
    def apply(self, n: UOp) -> UOp | None:
        chain = self.fast.get(n.op)
        if chain is None:
            return None
        if self.trace is not None:
            return self._apply_traced(n, self.dispatch[n.op])
        ctx = self.ctx
        for shift, fn in chain:  # one op function per composed part, each trying its rules in order
            try:
                hit = fn(n, ctx)
            except RuleFailed as f:
                raise self._failed(shift + f.rid, f.error)
            if hit is not None:
                r, rid = hit
                self._count(n, r, rid + shift)
                return r
        return None

    def _failed(self, rid: int, e: BaseException) -> BaseException:
        """What the engine raises for error `e` in rule `rid` on the fast path, as the traced path would."""
        if isinstance(e, RewriteNotReady):
            self.not_ready_rule = rid  # to name the rule if the node never gets ready
            return e
        if isinstance(e, RewriteError):
            return e
        return self._rule_failed(rid, e)

    def _apply_traced(self, n: UOp, chain) -> UOp | None:
        rules, trace, ctx = self.matcher.rules, self.trace, self.ctx
        for rid, fn in chain:
            st = trace.stat(rules[rid])
            st.tries += 1
            t0 = time.perf_counter()
            try:
                r = fn(n, ctx)
            except RewriteNotReady:
                self.not_ready_rule = rid
                raise
            except RewriteError:
                raise
            except Exception as e:
                raise self._rule_failed(rid, e)
            finally:
                dt = time.perf_counter() - t0
                st.seconds += dt
            if r is FACT_RECORDED:  # a fact rule recorded its fact and declines: counted, and the next rule runs
                st.hits += 1
                trace.fact(rules[rid])
                continue
            if r is not None and r is not n:
                st.hits += 1
                trace.record(self.name, rules[rid], n, r, dt)
                self._count(n, r, rid)
                return r
        return None

    def _rule_failed(self, rid: int, e: Exception) -> Exception:
        """An error raised inside rule `rid`, as a RuleError that names the rule (file:line) and chains `e`."""
        err = rule_error(self.matcher.rules[rid], e)
        if err is not e:
            err.__cause__ = e
        return err

    def _count(self, n: UOp, r: UOp, rid: int) -> None:
        if not isinstance(r, UOp):
            info = self.matcher.rules[rid]
            raise RewriteError(f"rule {info} returned {type(r).__name__}, not a UOp")
        self.rewrote[n] = r
        self.rewrote_by[n] = rid
        # a step costs the walk about one unit per source of its result: counting that, not just steps, bounds
        # the time of a rule that widens a node at every step (`(SINK ...s) -> (SINK ...s 0)`) as well
        self.steps += 1 + len(r.src)
        if self.steps > self.step_limit and self._over_limit():
            raise self._nontermination(n)

    def _over_limit(self) -> bool:
        # the limit scales with the graph, but counting the graph costs a walk: done only once the
        # steps pass the floor that no small graph reaches
        if self.root is not None:
            self.step_limit = max(STEP_FLOOR, 100 * (len(self.root.parents) + 1))
            self.root = None
        return self.steps > self.step_limit

    def fixpoint(self, n: UOp) -> UOp:
        r = self.apply(n)
        if r is None:  # most nodes: nothing matches
            return n
        n = r
        seen: dict[UOp, int] = {}
        for i in range(1, NODE_STEP_LIMIT * 2):
            r = self.apply(n)
            if r is None:
                return n
            if i >= NODE_STEP_LIMIT:
                if r in seen:
                    raise self._nontermination(r)
                seen[r] = i
            n = r
        raise self._nontermination(n)

    def _nontermination(self, start: UOp) -> RewriteError:
        # follow the chain of rewrites from `start`; a node seen twice closes a cycle
        order: list[tuple[UOp, int]] = []
        pos: dict[UOp, int] = {}
        n = start
        while n in self.rewrote and n not in pos and len(order) < 10000:
            pos[n] = len(order)
            nxt, rid = self.rewrote[n], self.rewrote_by[n]
            order.append((n, rid))
            n = nxt
        if n in pos:
            return self._rules_error("rewrite cycle", [rid for _, rid in order[pos[n]:]])
        # `start` may be a result not rewritten yet: then the latest rewrites are the growing ones
        recent = [rid for _, rid in order] or list(self.rewrote_by.values())
        counts: dict[int, int] = {}
        for rid in recent[-200:]:
            counts[rid] = counts.get(rid, 0) + 1
        return self._rules_error("rewrites do not terminate (the graph keeps growing)",
                                 sorted(counts, key=lambda r: -counts[r]))

    def _rules_error(self, what: str, rids: list[int]) -> RewriteError:
        lines: dict[str, None] = {}
        for rid in rids:
            info = self.matcher.rules[rid]
            lines[f"  {info.ruleset}/{info.name} at {info.loc}"] = None
        return RewriteError(f"{self.name}: {what}; rules involved:\n" + "\n".join(lines))

    def _deadlock(self, waiting: dict[UOp, list[Any]], root: UOp) -> RewriteError:
        """The walk stopped with nodes waiting on each other: a rule rewrote a node into a graph containing it,
        and sources are final first, so the node would be rewritten again inside its own result."""
        waits_on = {n: m for m, frames in waiting.items() for n in frames[0::3]}  # frames: n, cur, marker
        n, path = next(iter(waits_on), root), {}
        while n in waits_on and n not in path:
            path[n] = len(path)
            n = waits_on[n]
        cycle = list(path)[path[n]:] if n in path else []
        rewritten = [u for u in cycle if u in self.rewrote]
        if not rewritten:
            return self._nontermination(next(iter(waiting), root))
        what = (f"rewrite cycle: a node ({rewritten[0].op.name}) was rewritten into a graph that contains it, "
                f"which rewrites it again inside its own result")
        return self._rules_error(what, [self.rewrote_by[u] for u in rewritten])

    def _never_ready(self, deferred: list[tuple[UOp, Any, UOp]]) -> RewriteError:
        # per rule: how many nodes its callback kept deferring, and one of them
        per_rule: dict[int, list[UOp]] = {}
        for n, _, _ in deferred:
            per_rule.setdefault(self.not_ready.get(n, -1), []).append(n)
        lines = []
        for rid, nodes in per_rule.items():
            info = self.matcher.rules[rid] if rid >= 0 else None
            who = f"{info.ruleset}/{info.name} at {info.loc}" if info else "an unknown rule"
            lines.append(f"  {who}: {len(nodes)} node(s), e.g. {nodes[0].op.name}")
        return RewriteError(f"{self.name}: {len(deferred)} node(s) stayed not-ready after the whole graph was "
                            f"visited; the callbacks that kept raising RewriteNotReady:\n" + "\n".join(lines))

    # -- the walk
    def run(self, root: UOp) -> UOp:
        if not isinstance(root, UOp):
            raise TypeError(f"the graph to rewrite must be a UOp, not {type(root).__name__}")
        self.root = root
        replace, bottom_up = self.replace, self.bottom_up
        # frames live on one flat stack, without a tuple each (a tuple per frame is a tracked object per
        # node for the garbage collector, and on a deep graph most of them are alive at once): a node to
        # visit is the node alone; "rebuild n from cur's final sources" is n, cur, _REBUILD; "n becomes
        # what cur became" is n, cur, _RESOLVE. `waiting` holds frames in the same flat form.
        waiting: dict[UOp, list[Any]] = {}
        active: set[UOp] = set()
        deferred: list[tuple[UOp, Any, UOp]] = []  # (n, None or a marker, cur): rare, kept as tuples
        stack: list[Any] = [root]
        # bound once: this loop runs for every node of every stage
        push, pop, apply, fixpoint = stack.append, stack.pop, self.apply, self.fixpoint
        final, unmark = replace.__getitem__, active.discard
        rooted = self.rooted
        finished = stalled = 0

        def finish(n: UOp, result: UOp) -> None:
            replace[n] = result
            unmark(n)
            if waiting:  # nearly always empty: frames wait only where a rewrite looped back
                frames = waiting.pop(n, None)
                if frames:
                    stack.extend(frames)

        def wait(on: UOp, n: UOp, cur: UOp, marker: Any) -> None:
            frames = waiting.get(on)
            if frames is None:
                frames = waiting[on] = []
            frames += (n, cur, marker)

        while True:
            while stack:
                top = pop()
                if top is _REBUILD:
                    cur = pop()
                    n = pop()
                    if n in replace:
                        continue
                    try:  # sources are final first, so a source is missing only when a rewrite looped back
                        new_src = tuple(map(final, cur.src))
                    except KeyError:
                        wait(next(s for s in cur.src if s not in replace), n, cur, _REBUILD)
                        continue
                    if new_src == cur.src:  # UOps compare by identity
                        if bottom_up:
                            finished += 1
                            replace[n] = cur  # finish(n, cur), inline: the most common step of all
                            unmark(n)
                            if waiting:
                                frames = waiting.pop(n, None)
                                if frames:
                                    stack.extend(frames)
                            continue
                        try:
                            nxt = apply(cur)
                        except RewriteNotReady as e:
                            _unlink(e)
                            deferred.append((n, _REBUILD, cur))
                            self.not_ready[n] = self.not_ready_rule
                            continue
                        if nxt is None:
                            finished += 1
                            if cur is not n and cur not in replace:
                                finish(cur, cur)
                            finish(n, cur)
                            continue
                    else:
                        nxt = UOp(cur.op, cur.dtype, new_src, cur.arg, cur.tag)
                    push(n)
                    push(nxt)
                    push(_RESOLVE)
                    push(nxt)
                elif top is _RESOLVE:
                    cur = pop()
                    n = pop()
                    if n in replace:
                        continue
                    r = replace.get(cur)
                    if r is None:
                        wait(cur, n, cur, _RESOLVE)
                        continue
                    finished += 1
                    finish(n, r)
                else:
                    n = cur = top
                    if n in replace or n in active:
                        continue
                    if not n._mask & rooted:
                        finished += 1
                        finish(n, n)
                        continue
                    active.add(n)
                    if bottom_up:
                        try:
                            cur = fixpoint(n)
                        except RewriteNotReady as e:
                            _unlink(e)
                            active.discard(n)
                            deferred.append((n, None, n))
                            self.not_ready[n] = self.not_ready_rule
                            continue
                    push(n)
                    push(cur)
                    push(_REBUILD)
                    for s in reversed(cur.src):
                        if s not in replace:
                            push(s)
            if not deferred:
                break
            # a pass may finish nothing while callbacks record what they saw (children gating);
            # only a second such pass in a row means nothing can ever become ready
            stalled = stalled + 1 if finished == 0 else 0
            if stalled >= 2:
                raise self._never_ready(deferred)
            finished = 0
            for n, marker, cur in reversed(deferred):
                active.discard(n)
                if marker is None:
                    push(n)
                else:
                    push(n)
                    push(cur)
                    push(marker)
            deferred = []
        if root not in replace:
            raise self._deadlock(waiting, root)
        return replace[root]


def _unlink(e: RewriteNotReady) -> None:
    """Drop what a caught not-ready signal refers to. It is control flow, not an error: its traceback holds
    every frame of the walk, and the RuleFailed it was unwrapped from (its __context__) refers back to it,
    a reference cycle that would keep the whole schedule alive until the garbage collector finds it."""
    e.__traceback__ = None
    e.__context__ = None


# the markers of the walk's frames that are not a plain visit (see _Rewriter.run)
_REBUILD = object()
_RESOLVE = object()


def graph_rewrite(sink: UOp, rules: Matcher | HasMatcher, ctx: Any = None, bottom_up: bool = False,
                  name: str | None = None) -> UOp:
    """Rewrite every node reachable from `sink` to a fixed point of `rules`."""
    rw = _Rewriter(rules, ctx, bottom_up, name)
    if rw.trace is None or rw.trace.in_stage:
        return rw.run(sink)
    return _as_stage(rw, sink)


def _as_stage(rw: _Rewriter, sink: UOp) -> UOp:
    """A traced rewrite outside any pipeline (`rulec.load(...).rewrite(g)` in a script) is recorded as a stage
    of its own, so the trace tools see its input and output graphs as they see a pipeline stage's."""
    trace = rw.trace
    assert trace is not None
    index = trace.stage_begin("", rw.name, "rules", "", (rw.matcher.name,), sink, rw.matcher)
    t0 = time.perf_counter()
    out = None
    try:
        out = rw.run(sink)
        return out
    finally:
        trace.stage_end(index, out, time.perf_counter() - t0)


def graph_rewrite_map(sink: UOp, rules: Matcher | HasMatcher, ctx: Any = None, bottom_up: bool = False,
                      name: str | None = None) -> dict[UOp, UOp]:
    """Like graph_rewrite, but return the map from every original node to its rewritten form."""
    rw = _Rewriter(rules, ctx, bottom_up, name)
    rw.rooted = -1  # visit every node, even where no rule can fire, so that each has its entry
    rw.run(sink)
    return {u: rw.replace[u] for u in sink.toposort() if u in rw.replace}


