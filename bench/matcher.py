"""Rewrites per second of the symbolic rule set on index-arithmetic graphs, three ways.

    python bench/matcher.py [--sizes 10000 100000] [--repeat 3] [--no-egglog]

1. the generated Python matcher (what `rulec build` emits);
2. a naive matcher that interprets the same pattern trees at every node
   (bench/naive_matcher.py), with and without the root-op dispatch table;
3. the egglog engine (equality saturation + extraction).
All run in one process, side by side; ratios are against the generated matcher.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rulec  # noqa: E402
from rulec.compiler import compile_project  # noqa: E402
from rulec.runtime.resources import rules_dir  # noqa: E402
from rulec.runtime.engine.rewrite import graph_rewrite  # noqa: E402
from rulec.runtime.engine.trace import tracing  # noqa: E402

from indexgraphs import index_graph  # noqa: E402
from naive_matcher import naive_matcher  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-egglog", action="store_true")
    args = ap.parse_args()

    rs = rulec.load("symbolic")
    project = compile_project([rules_dir() / "symbolic.yaml"])
    rules = project.rules_of("symbolic")
    naive = naive_matcher("symbolic", rules)
    naive_flat = naive_matcher("symbolic", rules, dispatch=False)

    print(f"rule set symbolic: {len(rules)} rules; median of {args.repeat}\n")
    header = f"{'nodes':>8} {'engine':28} {'rewrites':>9} {'time ms':>10} {'rewrites/s':>12} {'vs generated':>13} {'nodes out':>10}"
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        g = index_graph(size)
        n_in = len(g.toposort())
        with tracing(keep_events=False) as t:
            expected = graph_rewrite(g, rs.matcher)
        n_rewrites = sum(s.hits for s in t.stats.values())
        runs = [("generated python matcher", lambda: graph_rewrite(g, rs.matcher)),
                ("naive (interpreted + dispatch)", lambda: graph_rewrite(g, naive)),
                ("naive (interpreted, no dispatch)", lambda: graph_rewrite(g, naive_flat))]
        if not args.no_egglog:
            runs.append(("egglog (saturate + extract)", lambda: rs.rewrite(g, engine="egglog")))
        base = None
        for label, fn in runs:
            reps = 1 if "egglog" in label else args.repeat
            try:
                secs, out = timed(fn, reps)
            except Exception as e:  # report, keep benchmarking the others
                print(f"{n_in:8d} {label:28} failed: {type(e).__name__}: {str(e)[:80]}")
                continue
            if "naive" in label:
                assert out is expected, "naive and generated matchers disagree"
            base = base or secs
            print(f"{n_in:8d} {label:28} {n_rewrites:9d} {secs * 1e3:10.1f} {n_rewrites / secs:12,.0f} "
                  f"{secs / base:12.2f}x {len(out.toposort()):10d}")
        print()


if __name__ == "__main__":
    main()
