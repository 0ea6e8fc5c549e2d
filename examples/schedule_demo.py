"""Schedule a small tensor program into kernels with the rule-file scheduler, run them, check with numpy.

    rulec build && python examples/schedule_demo.py
"""
from __future__ import annotations

import numpy as np

from rulec import Tensor
from rulec.backends.kernel_text import kernel_text


def main() -> None:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((4, 16)).astype(np.float32)
    w1_np = rng.standard_normal((16, 32)).astype(np.float32)
    w2_np = rng.standard_normal((32, 8)).astype(np.float32)
    x, w1, w2 = Tensor(x_np), Tensor(w1_np), Tensor(w2_np)
    Tensor.realize(x, w1, w2)  # inputs are buffers already: they cost no kernel

    out = ((x @ w1).relu() @ w2).softmax(axis=-1)
    kernels = Tensor.schedule(out)
    print(f"((x @ w1).relu() @ w2).softmax(-1): {len(kernels)} kernels\n")
    for i, k in enumerate(kernels):
        print(f"--- kernel {i}")
        print(kernel_text(k.ast))

    got = out.numpy()
    h = np.maximum(x_np @ w1_np, 0) @ w2_np
    e = np.exp(h - h.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    err = float(np.abs(got - want).max())
    print(f"\nmax |rulec - numpy| = {err:.2e}")
    if err > 1e-5:
        raise SystemExit("results differ from numpy")


if __name__ == "__main__":
    main()
