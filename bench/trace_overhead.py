"""What tracing costs: scheduling a transformer block with no trace, with counts only (what `rulec run` and
`rulec stats` record), and with every step kept (what `rulec trace`, `explain` and `why` record).

    python bench/trace_overhead.py [--repeat 9]

"Off" is the path every program takes: with no trace active, the engines read one variable per rewrite
call and per stage (`active_trace()`), and test it for None once per node they try; nothing is recorded
and nothing is timed. Each row is the median over runs; the modes alternate run by run so machine load
hits them alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from rulec import Tensor  # noqa: E402
from rulec.runtime.engine import trace as tracing  # noqa: E402
from rulec.runtime.tensor.realize import schedule  # noqa: E402
from transformer_block import B, D, HEADS, T, Block  # noqa: E402


def program() -> Tensor:
    block = Block(D, HEADS)
    for w in vars(block).values():
        if isinstance(w, Tensor):
            w.realize()
    x = Tensor.randn(B, T, D).realize()
    return block(x)


def timed(mode: str) -> float:
    out = program()  # a fresh graph each time: no scheduling result is reused
    t0 = time.perf_counter()
    if mode == "off":
        schedule(out)
    else:
        with tracing.tracing(keep_events=(mode == "steps")):
            schedule(out)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    modes = ("off", "counts", "steps")
    for mode in modes:  # warm: every rule set loaded, every cache filled once
        timed(mode)
    runs: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.repeat):
        for mode in modes:
            runs[mode].append(timed(mode))
    med = {m: statistics.median(v) for m, v in runs.items()}
    print(f"scheduling one transformer block (B={B}, T={T}, D={D}), median of {args.repeat} runs")
    print(f"{'mode':34} {'ms':>8} {'vs off':>8}")
    labels = {"off": "no trace (every program)", "counts": "counts only (rulec run, stats)", "steps": "every step kept (trace, explain)"}
    for m in modes:
        print(f"{labels[m]:34} {med[m] * 1e3:8.1f} {med[m] / med['off']:7.2f}x")


if __name__ == "__main__":
    main()
