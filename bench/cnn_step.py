"""One training step of a beautiful_mnist-style CNN (two 5x5 and two 3x3 convolutions, batchnorms, max
pools, Adam, batch 128, TinyJit): rulec against tinygrad 0.14, side by side, in one run.

    pip install -e '.[bench]'     # tinygrad 0.14, for this benchmark only
    python bench/cnn_step.py [--rounds 2] [--steps 8] [--batch 128]

The same script text runs on both: under rulec through its tinygrad layer (`rulec.compat`), under tinygrad
as itself, each in a child process (`--frontend`), the two alternating round by round so load on a shared
machine hits both alike. Inputs are random (2048 images), the first steps are warm-up (compiling, and
tinygrad's jit capture); the figure is the median of the later steps, whole steps (`loss.item()`), on CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WARM = 4  # steps before timing: the first compiles, the second is the jit's capture, then both are steady


def child(steps: int, batch: int) -> None:
    import numpy as np
    from tinygrad import Tensor, TinyJit, nn
    from tinygrad.helpers import Context
    from tinygrad.nn.optim import Adam
    from tinygrad.nn.state import get_parameters

    class Model:
        def __init__(self):
            self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), nn.BatchNorm(32), Tensor.max_pool2d,
                           nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), nn.BatchNorm(64), Tensor.max_pool2d,
                           lambda x: x.flatten(1), nn.Linear(576, 10)]

        def __call__(self, x):
            return x.sequential(self.layers)

    rng = np.random.default_rng(0)
    images = Tensor(rng.standard_normal((2048, 1, 28, 28)).astype(np.float32)).realize()
    labels = Tensor(rng.integers(0, 10, 2048).astype(np.int32)).realize()
    model = Model()
    opt = Adam(get_parameters(model))

    @TinyJit
    @Context(TRAINING=1)
    def step():
        opt.zero_grad()
        samples = Tensor.randint(batch, high=images.shape[0])
        loss = model(images[samples]).sparse_categorical_crossentropy(labels[samples]).backward()
        opt.step()
        return loss

    times = []
    for _ in range(WARM + steps):
        t0 = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - t0)
    print(json.dumps(times[WARM:]))


def run(frontend: str, steps: int, batch: int) -> list[float]:
    cmd = [sys.executable, *(["-m", "rulec.compat"] if frontend == "rulec" else []), __file__,
           "--frontend", frontend, "--steps", str(steps), "--batch", str(batch)]
    env = {**os.environ, "DEV": "CPU"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{frontend} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--frontend", choices=["rulec", "tinygrad"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.frontend is not None:
        return child(args.steps, args.batch)
    times: dict[str, list[float]] = {"rulec": [], "tinygrad": []}
    for _ in range(args.rounds):
        for frontend in times:
            times[frontend] += run(frontend, args.steps, args.batch)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"CNN training step (batch {args.batch}), median of {args.rounds} x {args.steps} steady steps, CPU")
    for k, v in times.items():
        print(f"{k:10} {med[k]:8.0f} ms   (min {min(v) * 1e3:.0f}, max {max(v) * 1e3:.0f})")
    print(f"tinygrad/rulec: {med['tinygrad'] / med['rulec']:.2f}x")


if __name__ == "__main__":
    main()
