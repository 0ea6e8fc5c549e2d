"""A program for the `rulec reduce` tests with a real error: the second layer's weights have the wrong
shape, so the second matmul raises "cannot matmul ... inner dimensions ... differ"."""
from rulec import Tensor

x = Tensor.rand(8, 24)
h = (x @ Tensor.randn(24, 16)).relu()
w2 = Tensor.randn(12, 4)
out = (h @ w2).softmax(-1).sum()
