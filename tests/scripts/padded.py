"""A padded and flipped program for the tool tests: its kernels have gated loads (CMPLT on ranges)."""
import numpy as np

from rulec import Tensor

x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
y = x.pad(((1, 2), (0, 1))).flip(0) * 3 + 1
print(y.numpy().sum())
