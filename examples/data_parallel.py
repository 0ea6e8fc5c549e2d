"""Data-parallel training on two devices (docs/multi-device.md): the batch split over CPU and CPU:1, the
weights replicated, one step of SGD per iteration. The losses are those of the same model on one device.

    rulec run examples/data_parallel.py --check
"""
import numpy as np

from rulec import Tensor
from rulec.nn.optim import SGD

DEVICES = ("CPU", "CPU:1")
rng = np.random.default_rng(0)
xs = rng.standard_normal((64, 8)).astype(np.float32)
ys = (xs @ rng.standard_normal((8, 1)).astype(np.float32) > 0).astype(np.float32)
w0 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
w1 = (rng.standard_normal((16, 1)) * 0.3).astype(np.float32)


def train(devices, steps=5):
    ws = [Tensor(w0.copy()), Tensor(w1.copy())]
    x, y = Tensor(xs), Tensor(ys)
    if devices:
        ws = [w.shard(devices).realize() for w in ws]        # replicated: a copy on each device
        x, y = x.shard(devices, axis=0), y.shard(devices, axis=0)  # each device gets half the batch
    opt = SGD(ws, lr=0.5)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (x @ ws[0]).relu().matmul(ws[1]).sigmoid().binary_crossentropy(y)
        loss.backward()   # the replicated weights' gradients are all-reduced over the devices
        opt.step()
        losses.append(loss.item())
    return losses, ws


one, _ = train(None)
two, ws = train(DEVICES)
print("one device: ", " ".join(f"{v:.5f}" for v in one))
print("two devices:", " ".join(f"{v:.5f}" for v in two))
np.testing.assert_allclose(two, one, rtol=1e-5)

# each device holds an equal copy of the weights; gathering to one device is a copy
first, second = ws[0].shards
np.testing.assert_array_equal(first.numpy(), second.numpy())
print("weights on", ws[0].device, "equal on every device; gathered:", ws[0].to("CPU").shape)
