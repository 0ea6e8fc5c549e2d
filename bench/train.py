"""One training step (forward, backward, Adam) of a transformer block: rulec against tinygrad 0.14, side by
side, in one run: scheduling time, kernel counts, and the time of the whole step on CPU.

    pip install -e '.[bench]'     # tinygrad 0.14, for this benchmark only
    python bench/train.py [--repeat 5] [--width 256] [--tokens 128] [--batch 4]

The same program text runs on both frontends. The parameters and the input are realized first. Each
repetition builds a fresh step (loss, gradients, Adam update); "schedule" times scheduling it
(`Tensor.schedule` here, `schedule_linear` in tinygrad 0.14, no compile, no run) on a warmed copy of the
training state, with nothing kept from earlier schedules on either side (tinygrad: SCACHE=0; rulec:
`forget_kept_results`), "step" times building and running a whole step (kernels warm: three steps of each run
first). The frontends alternate run by run, so load on a shared machine hits both alike; figures are
medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("DEV", "CPU")
os.environ.setdefault("SCACHE", "0")
os.environ.setdefault("TRAINING", "1")

import numpy as np  # noqa: E402

from schedule import count_kernels, transformer_block  # noqa: E402


def make(Tensor, Adam, args):
    rng = np.random.default_rng(0)
    d, t, b = args.width, args.tokens, args.batch
    shapes = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]
    params = [Tensor((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)).realize() for s in shapes]
    for p in params:
        p.requires_grad = True
    x = Tensor(rng.standard_normal((b, t, d)).astype(np.float32)).realize()
    mask = Tensor(np.tril(np.ones((t, t), dtype=bool))).realize()
    opt = Adam(params, lr=1e-3)

    def step():
        opt.zero_grad()
        loss = transformer_block(x, *params, mask).square().mean()
        loss.backward()
        return [loss, *opt.schedule_step()]

    return step


WARM_STEPS = 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()

    from rulec import Tensor as RTensor
    from rulec.nn.optim import Adam as RAdam
    from tinygrad import Tensor as TTensor
    from tinygrad.nn.optim import Adam as TAdam

    steps = {"rulec": make(RTensor, RAdam, args), "tinygrad": make(TTensor, TAdam, args)}
    tensors = {"rulec": RTensor, "tinygrad": TTensor}
    adams = {"rulec": RAdam, "tinygrad": TAdam}
    kernels, sched, whole = {}, {k: [] for k in steps}, {k: [] for k in steps}
    for name, step in steps.items():  # warm: the first steps create optimizer state and compile the kernels
        Tensor = tensors[name]              # of later steps (rulec: new kernels in steps 1 and 2, none after)
        for _ in range(WARM_STEPS):
            Tensor.realize(*step())
    for _ in range(args.repeat):
        for name, step in steps.items():
            Tensor = tensors[name]
            t0 = time.perf_counter()
            Tensor.realize(*step())
            whole[name].append(time.perf_counter() - t0)
            # scheduling is timed on a copy of the training state, warmed by one step: a step that is
            # scheduled but never run leaves its assigns pending, and the next step would chain onto them
            fresh = make(Tensor, adams[name], args)
            Tensor.realize(*fresh())
            outs = fresh()
            if name == "rulec":  # as tinygrad with SCACHE=0: nothing kept from the steps before
                from rulec.runtime.schedule.scheduler import forget_kept_results

                forget_kept_results()
            t0 = time.perf_counter()
            kernels[name] = count_kernels(Tensor, outs)
            sched[name].append(time.perf_counter() - t0)
    med = lambda v: statistics.median(v) * 1e3  # noqa: E731
    print(f"one Adam step of a transformer block (width {args.width}, {args.tokens} tokens, batch {args.batch}), "
          f"median of {args.repeat}")
    print(f"{'':10} {'kernels':>8} {'schedule ms':>12} {'step ms':>9}")
    for name in steps:
        print(f"{name:10} {kernels[name]:8d} {med(sched[name]):12.1f} {med(whole[name]):9.1f}")
    print(f"tinygrad/rulec: scheduling {med(sched['tinygrad']) / med(sched['rulec']):.2f}x, "
          f"step {med(whole['tinygrad']) / med(whole['rulec']):.2f}x")


if __name__ == "__main__":
    main()
