"""Scheduling time and kernel counts: rulec against tinygrad 0.14, side by side, in one run.

    pip install -e '.[bench]'     # tinygrad 0.14, for this benchmark only
    python bench/schedule.py [--repeat 15] [--only mlp,transformer,chain] [--quick] [--gc-collect]

Three families of programs, each at several sizes, so the table shows how scheduling time scales:
  mlp          an MLP 784-256-...-256-10, batch 64, with 1 to 16 hidden layers, forward
  transformer  a stack of 1 to 8 transformer blocks, d=256 h=8 T=128 B=4, forward
  chain        a chain of 100 to 5000 elementwise ops on a 64x64 tensor
The same program text runs on both frontends. Inputs are realized first, so they
cost no kernel; only scheduling is timed (`Tensor.schedule(...)`; tinygrad 0.14:
`schedule_linear`; no compile, no run), on a warm process, with tinygrad's
schedule cache off (SCACHE=0) and nothing rulec keeps from one schedule for the next
(`forget_kept_results`: folded index expressions, kernels found safe). The two schedulers alternate run by run, so load on
a shared machine hits both alike; the ratio is the median over runs of tinygrad
time / rulec time (above 1: rulec is faster), with its spread (min-max).
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("SCACHE", "0")
os.environ.setdefault("DEV", "CPU")

import numpy as np  # noqa: E402


def mlp(Tensor, x, *wb):
    for i in range(0, len(wb), 2):
        x = x @ wb[i] + wb[i + 1]
        if i + 2 < len(wb):
            x = x.relu()
    return [x]


def transformer_block(x, wq, wk, wv, wo, w1, w2, mask, heads=8):
    B, T, D = x.shape
    dh = D // heads

    def split(t):
        return t.reshape(B, T, heads, dh).permute(0, 2, 1, 3)

    h = x.layernorm()
    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    att = (q @ k.permute(0, 1, 3, 2)) * (1.0 / dh ** 0.5)
    att = mask.where(att, -1e9).softmax(-1)
    y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, D) @ wo
    x = x + y
    return x + (x.layernorm() @ w1).gelu() @ w2


def transformer(Tensor, x, mask, *ws):
    for i in range(0, len(ws), 6):
        x = transformer_block(x, *ws[i:i + 6], mask)
    return [x]


# one elementwise op per step, cycling through binary ops with a second input and unary ops
_CHAIN_STEPS: list[Callable] = [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x.relu(),
                                lambda x, y: x - y, lambda x, y: -x, lambda x, y: x.maximum(y)]


def chain(Tensor, x, y, n):
    for i in range(n):
        x = _CHAIN_STEPS[i % len(_CHAIN_STEPS)](x, y)
    return [x]


def inputs(family: str, size: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.05  # noqa: E731
    if family == "mlp":
        dims = [784] + [256] * size + [10]
        out = [f(64, 784)]
        for a, b in zip(dims, dims[1:]):
            out += [f(a, b), f(b)]
        return out
    if family == "transformer":
        B, T, D = 4, 128, 256
        out = [f(B, T, D), np.tril(np.ones((T, T), dtype=bool))]
        for _ in range(size):
            out += [f(D, D), f(D, D), f(D, D), f(D, D), f(D, 4 * D), f(4 * D, D)]
        return out
    return [f(64, 64), f(64, 64)]


def program(family: str, size: int) -> Callable:
    if family == "chain":
        return lambda Tensor, x, y: chain(Tensor, x, y, size)
    return {"mlp": mlp, "transformer": transformer}[family]


FAMILIES = {
    "mlp": ("MLP, {} hidden layers", [1, 2, 4, 8, 16], [1, 16]),
    "transformer": ("transformer stack, {} blocks", [1, 2, 4, 8], [1, 8]),
    "chain": ("elementwise chain, {} ops", [100, 500, 1000, 2000, 5000], [100, 5000]),
}


class Runner:
    """One frontend's program on realized inputs; `once()` schedules a fresh build of it."""

    def __init__(self, Tensor, prog, arrays, collect: bool = False):
        self.Tensor, self.prog, self.collect = Tensor, prog, collect
        self.inputs = [Tensor(a) for a in arrays]
        Tensor.realize(*self.inputs)
        self.times: list[float] = []
        self.kernels = self.uops = 0

    def once(self) -> float:
        outs = self.prog(self.Tensor, *self.inputs)
        self.uops = len(outs[0].uop.toposort())
        if self.Tensor.__module__.startswith("rulec"):  # untimed: as a fresh graph, with nothing kept from the
            from rulec.runtime.schedule.scheduler import forget_kept_results  # last run (tinygrad: SCACHE=0)

            forget_kept_results()
        if self.collect:  # untimed: this run starts with no garbage of the other scheduler's to collect
            gc.collect()
        t0 = time.perf_counter()
        self.kernels = count_kernels(self.Tensor, outs)
        dt = time.perf_counter() - t0
        self.times.append(dt)
        return dt


def count_kernels(Tensor, outs) -> int:
    """Schedule `outs` (the timed part) and count the kernels; copies and views are not kernels."""
    if hasattr(Tensor, "schedule_linear"):  # tinygrad 0.14: a LINEAR of CALLs; a kernel CALLs a SINK
        linear = outs[0].schedule_linear(*outs[1:])
        return sum(1 for c in linear.src if c.src and c.src[0].op.name == "SINK")
    return len(Tensor.schedule(*outs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default=",".join(FAMILIES), help="families to run, comma-separated: "
                    + ", ".join(FAMILIES))
    ap.add_argument("--sizes", default=None, help="sizes to run, comma-separated (default: each family's)")
    ap.add_argument("--quick", action="store_true", help="only the smallest and largest size of each family")
    ap.add_argument("--gc-collect", action="store_true",
                    help="a full garbage collection before each timed run (untimed, for both schedulers): each then "
                         "pays only for the collections its own allocations trigger. Without it, one scheduler's "
                         "garbage can be collected in the other's timed run, and where the collections fall "
                         "locks into the alternation")
    args = ap.parse_args()

    from rulec import Tensor as RTensor
    try:
        from tinygrad import Tensor as TTensor
        import tinygrad
        tg_version = getattr(tinygrad, "__version__", "0.14")
    except ImportError:
        TTensor, tg_version = None, "not installed (pip install -e '.[bench]')"

    print(f"tinygrad: {tg_version}; median of {args.repeat} warm runs, the two schedulers alternating\n")
    header = (f"{'program':34} {'uops':>6} {'kernels rulec/tinygrad':>23} {'rulec ms':>9} {'tinygrad ms':>12} "
              f"{'tinygrad/rulec':>15} {'(min-max)':>13}")
    print(header)
    print("-" * len(header))
    for family in args.only.split(","):
        label, sizes, quick = FAMILIES[family]
        if args.sizes:
            sizes = [int(s) for s in args.sizes.split(",")]
        elif args.quick:
            sizes = quick
        points: list[tuple[int, float, float | None]] = []  # (size, rulec ms, tinygrad ms)
        for size in sizes:
            arrays, prog = inputs(family, size), program(family, size)
            rulec = Runner(RTensor, prog, arrays, args.gc_collect)
            tiny = Runner(TTensor, prog, arrays, args.gc_collect) if TTensor is not None else None
            ratios = []
            for i in range(args.repeat + 1):  # the first round warms both up and is not counted
                r = rulec.once()
                if tiny is not None:
                    t = tiny.once()
                    if i:
                        ratios.append(t / r)
            r_ms = statistics.median(rulec.times[1:]) * 1e3
            name = label.format(size)
            if tiny is not None:
                t_ms = statistics.median(tiny.times[1:]) * 1e3
                print(f"{name:34} {rulec.uops:6d} {f'{rulec.kernels} / {tiny.kernels}':>23} {r_ms:9.1f} "
                      f"{t_ms:12.1f} {statistics.median(ratios):14.2f}x "
                      f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>13}", flush=True)
            else:
                print(f"{name:34} {rulec.uops:6d} {f'{rulec.kernels} / -':>23} {r_ms:9.1f} {'-':>12} {'-':>15}",
                      flush=True)
            points.append((size, r_ms, statistics.median(tiny.times[1:]) * 1e3 if tiny is not None else None))
        if len(points) > 1:
            print(growth_lines(label, points), flush=True)


def growth_lines(label: str, points: list[tuple[int, float, float | None]]) -> str:
    """How each scheduler's time grows over a family's sizes.

    The growth factor (largest size's time / smallest's) also falls with a larger fixed cost per schedule,
    so the time is split, by a least-squares line over all sizes, into a fixed part and a part per unit
    added (a layer, a block, an op): the ratio of the per-unit parts is the lead the largest graphs tend
    to. Whether the per-unit cost itself grows (superlinear time) shows in the cost of a unit over the
    first interval of sizes against the last."""
    (s0, r0, t0), (s1, r1, t1) = points[0], points[-1]
    have_tiny = all(t is not None for _, _, t in points)
    out = [f"  growth, {label.format(s0)} -> {s1}: rulec {r1 / r0:.1f}x"
           + (f", tinygrad {t1 / t0:.1f}x" if have_tiny else "")]
    fits = [("rulec", _line_fit([(s, r) for s, r, _ in points]))]
    if have_tiny:
        fits.append(("tinygrad", _line_fit([(s, t) for s, _, t in points])))
    out.append("  fixed + per unit (least squares): " + "; ".join(f"{who} {a:.3g} + {b:.3g} ms" for who, (a, b) in fits)
               + (f"; per-unit ratio tinygrad/rulec {fits[1][1][1] / fits[0][1][1]:.2f}x" if have_tiny else ""))
    if len(points) > 2:
        def unit(k: int, i: int) -> float:
            return (points[i + 1][k] - points[i][k]) / (points[i + 1][0] - points[i][0])
        steps = [("rulec", 1)] + ([("tinygrad", 2)] if have_tiny else [])
        out.append("  per unit, first interval -> last: "
                   + "; ".join(f"{who} {unit(k, 0):.3g} -> {unit(k, len(points) - 2):.3g} ms" for who, k in steps))
    return "\n".join(out)


def _line_fit(xy: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points."""
    n = len(xy)
    mx, my = sum(x for x, _ in xy) / n, sum(y for _, y in xy) / n
    sxx = sum((x - mx) ** 2 for x, _ in xy)
    slope = sum((x - mx) * (y - my) for x, y in xy) / sxx
    return my - slope * mx, slope


if __name__ == "__main__":
    main()
