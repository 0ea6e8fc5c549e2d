"""Scheduling time and kernel counts: rulec against tinygrad 0.14, side by side, in one run.

    pip install -e '.[bench]'     # tinygrad 0.14, for this benchmark only
    python bench/schedule.py [--repeat 15]

The same program text runs on both frontends. Inputs are realized first, so they
cost no kernel; only scheduling is timed (`Tensor.schedule(...)`; tinygrad 0.14: `schedule_linear`) (no compile, no run), on a
warm process, with tinygrad's schedule cache off (SCACHE=0). Ratios are
tinygrad time / rulec time (above 1: rulec is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("SCACHE", "0")
os.environ.setdefault("DEV", "CPU")

import numpy as np  # noqa: E402


def mlp(Tensor, x, w1, b1, w2, b2):
    return [((x @ w1 + b1).relu() @ w2 + b2)]


def transformer_block(Tensor, x, wq, wk, wv, wo, w1, w2, mask, heads=8):
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
    return [x + (x.layernorm() @ w1).gelu() @ w2]


def inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.05  # noqa: E731
    if name == "mlp":
        return [f(64, 784), f(784, 512), f(512), f(512, 10), f(10)]
    B, T, D = 4, 128, 256
    mask = np.tril(np.ones((T, T), dtype=bool))
    return [f(B, T, D), f(D, D), f(D, D), f(D, D), f(D, D), f(D, 4 * D), f(4 * D, D), mask]


PROGRAMS = {"mlp": ("MLP 784-512-10, batch 64, forward", mlp),
            "transformer": ("transformer block d=256 h=8 T=128 B=4, forward", transformer_block)}


def measure(Tensor, prog, arrays, repeat: int) -> tuple[float, int, int]:
    ts = [Tensor(a) for a in arrays]
    Tensor.realize(*ts)
    times, n_kernels, n_uops = [], 0, 0
    for _ in range(repeat + 1):
        outs = prog(Tensor, *ts)
        n_uops = len(outs[0].uop.toposort())
        t0 = time.perf_counter()
        n_kernels = count_kernels(Tensor, outs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]), n_kernels, n_uops


def count_kernels(Tensor, outs) -> int:
    """Schedule `outs` (the timed part) and count the kernels; copies and views are not kernels."""
    if hasattr(Tensor, "schedule_linear"):  # tinygrad 0.14: a LINEAR of CALLs; a kernel CALLs a SINK
        linear = outs[0].schedule_linear(*outs[1:])
        return sum(1 for c in linear.src if c.src and c.src[0].op.name == "SINK")
    return len(Tensor.schedule(*outs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    from rulec import Tensor as RTensor
    try:
        from tinygrad import Tensor as TTensor
        import tinygrad
        tg_version = getattr(tinygrad, "__version__", "0.14")
    except ImportError:
        TTensor, tg_version = None, "not installed (pip install -e '.[bench]')"

    print(f"tinygrad: {tg_version}; median of {args.repeat} warm runs\n")
    header = f"{'program':50} {'uops':>5} {'kernels rulec/tinygrad':>23} {'rulec ms':>9} {'tinygrad ms':>12} {'tinygrad/rulec':>15}"
    print(header)
    print("-" * len(header))
    for key, (label, prog) in PROGRAMS.items():
        arrays = inputs(key)
        r_time, r_k, r_uops = measure(RTensor, prog, arrays, args.repeat)
        if TTensor is not None:
            t_time, t_k, _ = measure(TTensor, prog, arrays, args.repeat)
            print(f"{label:50} {r_uops:5d} {f'{r_k} / {t_k}':>23} {r_time * 1e3:9.1f} {t_time * 1e3:12.1f} "
                  f"{t_time / r_time:14.2f}x")
        else:
            print(f"{label:50} {r_uops:5d} {f'{r_k} / -':>23} {r_time * 1e3:9.1f} {'-':>12} {'-':>15}")


if __name__ == "__main__":
    main()
