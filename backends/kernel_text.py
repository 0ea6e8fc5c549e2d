"""`kernel_text`: a kernel AST as readable C-like pseudo-code (loops over ranges, loads, stores, reduces).

The first of the backends: it prints what a code generator would emit, for people (error notes of the
interpreter and of the kernel checker, examples, debugging). It evaluates nothing.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Generator

from rulec.runtime.ir.alu import reduce_identity
from rulec.runtime.ir.dtype import PtrDType
from rulec.runtime.interpret.interpret import range_name, short_text
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.ir.walk import run_recursive

_INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.IDIV: "/", Ops.MOD: "%",
          Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^",
          Ops.SHL: "<<", Ops.SHR: ">>"}
_CALL = {Ops.MAX: "max", Ops.POW: "pow", Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin",
         Ops.TRUNC: "trunc", Ops.MULACC: "mulacc"}


def _strip(s: str) -> str:
    """`s` without one pair of parentheses around the whole of it."""
    if not (s.startswith("(") and s.endswith(")")):
        return s
    depth = 0
    for i, ch in enumerate(s):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(s) - 1:
            return s
    return s[1:-1]


def _const_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")
    return repr(v)


class _Text:
    """Renders a kernel as C-like pseudo-code: loop nests, accumulators for REDUCEs, temporaries."""

    def __init__(self, ast: UOp):
        self.lines: list[str] = []
        self.names: dict[UOp, str] = {}  # accumulators and temporaries visible in the current scope
        self.count = 0
        self.uses = Counter(s for u in ast.toposort() for s in u.src)
        self.open: list[UOp] = []  # the ranges of the loops open where the next line goes

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count - 1}"

    def loops(self, ranges: tuple[UOp, ...], depth: int, body: Callable[[int], None],
              roots: tuple[UOp, ...] = ()) -> None:
        """Open `ranges` one loop at a time; before each loop, emit the accumulators of the REDUCEs under
        `roots` that depend on no range still to open: a reduce runs once per iteration of the innermost
        loop it reads, not inside loops it only broadcasts along."""
        saved = dict(self.names)  # names made inside the loops are not visible after them
        self.hoist(roots, depth)
        if ranges:
            r, name = ranges[0], range_name(ranges[0])
            self.emit(depth, f"for (int {name} = 0; {name} < {_strip(self.expr(r.src[0], depth))}; {name}++) {{")
            self.open.append(r)
            self.loops(ranges[1:], depth + 1, body, roots)
            self.open.pop()
            self.emit(depth, "}")
        else:
            body(depth)
        self.names = saved

    def hoist(self, roots: tuple[UOp, ...], depth: int) -> None:
        for root in roots:
            for u in root.toposort(gate=lambda n: n.op is not Ops.REDUCE):
                if u.op is Ops.REDUCE and u not in self.names and _free_ranges(u) <= set(self.open):
                    self.reduce(u, depth)

    def prepare(self, roots: tuple[UOp, ...], depth: int) -> None:
        """Emit the accumulators of the REDUCEs `roots` use (not those nested inside other REDUCEs)."""
        for root in roots:
            for u in root.toposort(gate=lambda n: n.op is not Ops.REDUCE):
                if u.op is Ops.REDUCE and u not in self.names:
                    self.reduce(u, depth)

    def reduce(self, u: UOp, depth: int) -> None:
        acc, op = self.fresh("acc"), u.arg
        init = _const_text(reduce_identity(op, u.dtype) if op in (Ops.ADD, Ops.MUL, Ops.MAX) else None)
        self.emit(depth, f"{u.dtype.scalar.name} {acc} = {init};")

        def body(d: int) -> None:
            self.prepare((u.src[0],), d)
            v = _strip(self.expr(u.src[0], d))
            line = {Ops.ADD: f"{acc} += {v};", Ops.MUL: f"{acc} *= {v};"}.get(op, f"{acc} = max({acc}, {v});")
            self.emit(d, line)

        self.loops(u.src[1:], depth, body, (u.src[0],))
        self.names[u] = acc

    def ref(self, index: UOp, depth: int) -> tuple[str | None, str]:
        """(mask or None, `bufN[idx]`) of an INDEX."""
        steps = self._ref(index)
        text = None
        try:
            while True:
                text = self.expr(steps.send(text), depth)
        except StopIteration as done:
            return done.value

    def _ref(self, index: UOp) -> Generator[UOp, str, tuple[str | None, str]]:
        # `yield u` asks for the text of u (see expr)
        g, idx = index.src[0], index.src[-1]
        gate = None
        while idx.op is Ops.WHERE and idx.src[2].op is Ops.INVALID:
            cond = _strip((yield idx.src[0]))
            gate = cond if gate is None else f"({gate}) && ({cond})"
            idx = idx.src[1]
        return gate, f"buf{g.arg}[{_strip((yield idx))}]"

    def expr(self, u: UOp, depth: int) -> str:
        # a node's text is final once made (temporaries are named on first use), so each is made once
        return run_recursive(lambda n: self._expr(n, depth), u, memo=dict(self.names))

    def _expr(self, u: UOp, depth: int) -> Generator[UOp, str, str]:
        if u in self.names:
            return self.names[u]
        text = yield from self._render(u)
        if self.uses[u] > 1 and len(text) > 24 and u.op is not Ops.REDUCE:
            name = self.fresh("t")
            self.emit(depth, f"{u.dtype.scalar.name} {name} = {_strip(text)};")
            self.names[u] = name
            return name
        return text

    def _render(self, u: UOp) -> Generator[UOp, str, str]:
        # `yield src` asks for the text of a source, in the order the text reads (temporaries come out in
        # that order); a LOAD renders its INDEX itself
        op = u.op

        def args() -> Generator[UOp, str, str]:
            parts = []
            for x in u.src:
                parts.append(_strip((yield x)))
            return ", ".join(parts)

        if op is Ops.CONST:
            return _const_text(u.arg)
        if op is Ops.DEFINE_VAR:
            return str(u.arg[0])
        if op is Ops.RANGE:
            return range_name(u)
        if op is Ops.LOAD and u.src and u.src[0].op is Ops.INDEX:
            gate, text = yield from self._ref(u.src[0])
            return text if gate is None else f"({gate} ? {text} : 0)"
        if op in _INFIX and len(u.src) == 2:
            a = yield u.src[0]
            return f"({a} {_INFIX[op]} {(yield u.src[1])})"
        if op in _CALL:
            return f"{_CALL[op]}({(yield from args())})"
        if op is Ops.NEG:
            return f"(-{(yield u.src[0])})"
        if op is Ops.RECIP:
            return f"(1 / {(yield u.src[0])})"
        if op is Ops.CAST:
            return f"(({u.dtype.scalar.name}){(yield u.src[0])})"
        if op is Ops.BITCAST:
            return f"bitcast<{u.dtype.scalar.name}>({_strip((yield u.src[0]))})"
        if op is Ops.WHERE and len(u.src) == 3:
            a = yield u.src[0]
            b = yield u.src[1]
            return f"({a} ? {b} : {(yield u.src[2])})"
        return f"{op.name}({(yield from args())})"

    def store(self, st: UOp, depth: int) -> None:
        self.prepare(st.src[:2], depth)
        if st.src[0].op is Ops.INDEX:
            gate, target = self.ref(st.src[0], depth)
        else:
            gate, target = None, f"*{self.expr(st.src[0], depth)}"
        line = f"{target} = {_strip(self.expr(st.src[1], depth))};"
        self.emit(depth, line if gate is None else f"if ({gate}) {line}")


def _free_ranges(u: UOp) -> set[UOp]:
    """The ranges `u` reads that no REDUCE inside it closes."""
    topo = u.toposort()
    closed = {r for x in topo if x.op is Ops.REDUCE for r in x.src[1:]}
    return {x for x in topo if x.op is Ops.RANGE} - closed


def kernel_text(ast: UOp) -> str:
    """A readable, C-like rendering of a kernel AST (loops over ranges, loads, stores, reduces)."""
    topo = ast.toposort()
    bufs = sorted((u for u in topo if u.op is Ops.DEFINE_GLOBAL), key=lambda g: g.arg if isinstance(g.arg, int) else -1)
    params = [f"{g.dtype.scalar.name} buf{g.arg}[{g.dtype.size if isinstance(g.dtype, PtrDType) else '?'}]"
              for g in bufs]
    params += [f"int {v.arg[0]} /* {v.arg[1]}..{v.arg[2]} */" for v in topo if v.op is Ops.DEFINE_VAR]
    t = _Text(ast)
    t.emit(0, f"kernel({', '.join(params)}) {{")
    for st in ast.src if ast.op is Ops.SINK else (ast,):
        if st.op is Ops.STORE:
            t.loops(st.src[2:], 1, lambda d, st=st: t.store(st, d), st.src[:2])
        else:
            t.emit(1, f"{short_text(st)};")
    t.emit(0, "}")
    return "\n".join(t.lines)
