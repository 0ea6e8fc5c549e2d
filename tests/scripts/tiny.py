"""A small program for the tool tests: an elementwise op, a reduction and a matmul."""
import numpy as np

from rulec import Tensor

x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
y = ((x + 1) * 2).sum(1)
print("sum", y.numpy().tolist())
z = (x @ x.T).relu()
print("matmul", z.numpy().shape)
