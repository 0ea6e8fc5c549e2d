"""C kernels with a tile's lanes as vectors against the same kernels with every lane scalar, in one run.

    OMP_NUM_THREADS=1 python bench/vectors.py [--repeat N]

Each workload's kernels are rendered both ways (`render(ast, "c", vectors=...)`, backends/vectorize.py),
compiled, and run on the same random inputs; the table gives the sum over the workload's kernels of each
kernel's best time of `--repeat` runs, and whether the two gave the same bits (nan payloads aside).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from rulec import Tensor
from rulec.backends.c.runner import compile_c
from rulec.backends.render import kernel_name, render
from rulec.runtime.codegen.lower import lower

rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def conv_grads() -> list[Tensor]:
    x, w = Tensor(f32(32, 32, 24, 24), requires_grad=True), Tensor(f32(32, 32, 5, 5), requires_grad=True)
    (x.relu().conv2d(w) * Tensor(f32(32, 32, 20, 20))).sum().backward()
    return [x.grad, w.grad]


WORKLOADS = {
    "matmul 512x512": lambda: [Tensor(f32(512, 512)) @ Tensor(f32(512, 512))],
    "linear 256x784 @ 784x128 + bias": lambda: [Tensor(f32(256, 784)).linear(Tensor(f32(784, 128)), Tensor(f32(128)))],
    "attention scores + softmax 8x128x64": lambda: [(Tensor(f32(8, 128, 64)) @ Tensor(f32(8, 64, 128))).softmax(-1)],
    "conv2d 1->32 5x5, batch 64": lambda: [Tensor(f32(64, 1, 28, 28)).conv2d(Tensor(f32(32, 1, 5, 5)))],
    "relu(conv2d 32->32 5x5 + bias), batch 32": lambda: [
        Tensor(f32(32, 32, 24, 24)).conv2d(Tensor(f32(32, 32, 5, 5)), Tensor(f32(32))).relu()],
    "conv2d 32->32 5x5 input + weight gradients, batch 32": conv_grads,
    "max_pool2d 32x32x24x24": lambda: [Tensor(f32(32, 32, 24, 24)).max_pool2d()],
    "sum over rows 1024x1024": lambda: [Tensor(f32(1024, 1024)).sum(1)],
}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    return np.array_equal(np.where(np.isnan(a), 0, a).view(np.uint8), np.where(np.isnan(b), 0, b).view(np.uint8))


def measure(outs: list[Tensor], repeat: int) -> tuple[float, float, bool]:
    total = {True: 0.0, False: 0.0}
    equal = True
    for item in Tensor.schedule(*outs):
        k = lower(item.ast)
        inputs = [np.zeros(g.dtype.size, np.dtype(g.dtype.base.name)) if g.arg in k.outputs
                  else rng.standard_normal(g.dtype.size).astype(np.dtype(g.dtype.base.name)) for g in k.globals]
        results = {}
        for vectors in (True, False):
            program = compile_c(kernel_name(item.ast), render(item.ast, "c", vectors=vectors))
            best = float("inf")
            for _ in range(repeat):
                bufs = [a.copy() for a in inputs]
                t0 = time.perf_counter()
                program(bufs)
                best = min(best, time.perf_counter() - t0)
            total[vectors] += best
            results[vectors] = bufs
        equal &= all(same_bits(a, b) for a, b in zip(results[True], results[False]))
    return total[False], total[True], equal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print("| workload | scalar ms | vectors ms | speedup | same bits |")
    print("|---|---|---|---|---|")
    for name, build in WORKLOADS.items():
        scalar, vector, equal = measure(build(), args.repeat)
        print(f"| {name} | {scalar * 1e3:.2f} | {vector * 1e3:.2f} | {scalar / vector:.2f}x | {'yes' if equal else 'NO'} |")


if __name__ == "__main__":
    main()
