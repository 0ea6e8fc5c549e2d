"""A long elementwise chain (10k+ nodes in the scheduler's graphs), for the explorer's load-time test."""
import sys

from rulec import Tensor

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2500
x = Tensor.ones(4, 4)
for i in range(n):
    x = x * 1.0001 + (i % 7)
print(float(x.numpy()[0, 0]))
