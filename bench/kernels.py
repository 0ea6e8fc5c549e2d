"""Generated C kernels against numpy and tinygrad 0.14's CPU backend, in one run, as ratios.

    python bench/kernels.py [--repeat N]
    PYTHONPATH=/path/to/tinygrad python bench/kernels.py   # tinygrad 0.14 (bench-only extra: .[bench])

Each workload runs once (the first call: it compiles, unless the kernel cache already holds the kernels;
run with an empty RULEC_CACHE_DIR for cold figures), then `--repeat` times warm; the table gives the
median warm time. Results are checked against numpy. Time is the whole realize: scheduling, lowering (cached after the first call), and the kernels.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("DEV", "CPU")


def _time(fn, repeat: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def workloads(T):
    rng = np.random.default_rng(0)
    x4m = rng.standard_normal(1 << 22).astype(np.float32)
    y4m = rng.standard_normal(1 << 22).astype(np.float32)
    s = rng.standard_normal((4096, 1024)).astype(np.float32)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)

    def softmax_np(v):
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    d, t_len, batch, heads = 256, 128, 4, 4
    xb = rng.standard_normal((batch, t_len, d)).astype(np.float32)
    ws = [(rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32) for _ in range(4)]
    w1 = (rng.standard_normal((d, 4 * d)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((4 * d, d)) / np.sqrt(4 * d)).astype(np.float32)
    mask = np.triu(np.full((t_len, t_len), -1e9, np.float32), 1)

    def block(t):
        """A causal pre-norm transformer block, written with the API both libraries share."""
        x, wq, wk, wv, wo, f1, f2, m = t
        h = x.layernorm()
        split = lambda y: y.reshape(batch, t_len, heads, d // heads).permute(0, 2, 1, 3)
        q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
        att = ((q @ k.permute(0, 1, 3, 2)) * (1 / np.sqrt(d // heads)) + m).softmax(-1)
        x = x + ((att @ v).permute(0, 2, 1, 3).reshape(batch, t_len, d) @ wo)
        return x + ((x.layernorm() @ f1).relu() @ f2)

    def block_np():
        def ln(y):
            mu = y.mean(-1, keepdims=True)
            return (y - mu) / np.sqrt(((y - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        h = ln(xb)
        split = lambda y: y.reshape(batch, t_len, heads, d // heads).transpose(0, 2, 1, 3)
        q, k, v = split(h @ ws[0]), split(h @ ws[1]), split(h @ ws[2])
        att = softmax_np(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads) + mask)
        x = xb + (att @ v).transpose(0, 2, 1, 3).reshape(batch, t_len, d) @ ws[3]
        return x + np.maximum(ln(x) @ w1, 0) @ w2

    return [
        ("elementwise 4M: (x*y+1).relu()", lambda t: (t[0] * t[1] + 1).relu(), lambda: np.maximum(x4m * y4m + 1, 0), (x4m, y4m)),
        ("sum of 4M", lambda t: t[0].sum(), lambda: x4m.sum(), (x4m,)),
        ("softmax 4096x1024", lambda t: t[0].softmax(-1), lambda: softmax_np(s), (s,)),
        ("matmul 512x512", lambda t: t[0] @ t[1], lambda: a @ b, (a, b)),
        ("transformer block d=256 T=128 B=4", block, block_np, (xb, *ws, w1, w2, mask)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from rulec import Tensor as RT

    try:
        from tinygrad import Tensor as TT
    except ImportError:
        TT = None
    print("| workload | numpy ms | rulec first ms | rulec warm ms | tinygrad warm ms | rulec/numpy | rulec/tinygrad |")
    print("|---|---|---|---|---|---|---|")
    for name, build, ref, inputs in workloads(RT):
        rins = [RT(v) for v in inputs]
        for t in rins:
            t.realize()
        first, warm = _time(lambda: build(rins).realize(), args.repeat)  # first: with compiling, unless cached
        want = ref()
        got = build(rins).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
        _, np_t = _time(ref, args.repeat)
        tg = "n/a"
        ratio_tg = "n/a"
        if TT is not None:
            tins = [TT(v).realize() for v in inputs]
            _, tg_t = _time(lambda: build(tins).realize(), args.repeat)
            tg, ratio_tg = f"{tg_t * 1e3:.2f}", f"{warm / tg_t:.2f}x"
        print(f"| {name} | {np_t * 1e3:.2f} | {first * 1e3:.1f} | {warm * 1e3:.2f} | {tg} | {warm / np_t:.2f}x | {ratio_tg} |")


if __name__ == "__main__":
    main()
