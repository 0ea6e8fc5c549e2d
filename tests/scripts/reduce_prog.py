"""A program for the `rulec reduce` tests: about twenty statements, one of which (a padded tensor that is
flipped later) is the "failure" that tests/scripts/reduce_check.py looks for."""
import numpy as np

from rulec import Tensor

BATCH, WIDTH = 16, 64


def scale(t, k=2.0):
    return t * k + 1


Tensor.manual_seed(3)
x = Tensor.rand(BATCH, WIDTH)
w = Tensor.randn(WIDTH, 32) * np.sqrt(2 / WIDTH)
h = x.linear(w).relu()
print("hidden", h.shape)
for i in range(3):
    h = scale(h, k=0.5)
padded = h.pad(((1, 2), (0, 4))).contiguous()
total = padded.sum(axis=1, keepdim=True)
if total.shape[0] > 4:
    print("rows", total.shape[0])
else:
    print("few rows")
flipped = (padded * 3).flip(0).reshape(19, 36)
probs = h.softmax(-1)
print("probs", probs.numpy().sum())
print("flipped", flipped.numpy().shape)
mean = x.mean()
print("mean", float(mean.numpy()))
