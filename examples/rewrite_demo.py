"""Simplify an index expression with the shipped `symbolic` rule set, on both engines.

    rulec build && python examples/rewrite_demo.py
"""
from __future__ import annotations

import time

import rulec
from rulec.runtime.engine.trace import tracing
from rulec.runtime.ir.uop import UOp


def main() -> None:
    rs = rulec.load("symbolic")
    print(f"loaded {rs}: {rs.doc.splitlines()[0] if rs.doc else ''}")

    # an index expression as a scheduler produces it: a flattened 2-D index split back apart
    row, col = UOp.range(8, 0), UOp.range(16, 1)
    flat = row * 16 + col
    expr = ((flat // 16) * 16 + flat % 16) * 1 + (col - col) + (row * 0)
    print(f"\ninput  ({len(expr.toposort())} nodes):\n  {expr}")

    with tracing() as t:
        t0 = time.perf_counter()
        out = rs.rewrite(expr)
        dt = time.perf_counter() - t0
    print(f"python ({len(out.toposort())} nodes, {dt * 1e3:.2f} ms):\n  {out}")
    print("\nrules that fired:")
    for ev in t.events:
        print(f"  {ev.rule.name:32} {ev.rule.loc}")

    if not rs.has_callbacks:
        try:
            t0 = time.perf_counter()
            egg = rs.rewrite(expr, engine="egglog")
            dt = time.perf_counter() - t0
            print(f"\negglog ({len(egg.toposort())} nodes, {dt * 1e3:.1f} ms):\n  {egg}")
        except Exception as e:  # the demo should show both engines, but never hide why one failed
            print(f"\negglog engine failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
