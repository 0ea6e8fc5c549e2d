"""Tensor programs that reach the scheduler's and the lowering's less common rules: assigns, copies between
devices, empty tensors, symbolic shapes, closed-form sums of aranges, padding read through ALU ops and
comparisons, products. Each result is checked against numpy. A corpus for `rulec stats --fail-on-dead`."""
import numpy as np

from rulec import Tensor
from rulec.runtime.ir.uop import UOp

rng = np.random.default_rng(0)
A = rng.standard_normal((4, 6)).astype(np.float32)
checked = 0


def same(t, want, rtol=1e-4):
    global checked
    np.testing.assert_allclose(t.numpy(), want, rtol=rtol, atol=1e-5)
    checked += 1


def realized(a):
    return Tensor(a).realize()


# assigns: plain, reading the target at another index, two that read each other (lazily: q gets p's new value)
a = realized(A.copy())
a.assign(a + 1).realize()
same(a, A + 1)
a = realized(A.copy())
a.assign(a.flip(1) * 2).realize()
same(a, A[:, ::-1] * 2)
p, q = realized(A.copy()), realized(-A)
p.assign(q)
q.assign(p)
Tensor.realize(p, q)
same(p, -A)
same(q, -A)
v = realized(A.copy())
same((v + 1).assign(v * 3), A * 3)  # assigning to a computed tensor is just its value

# copies between devices: whole, reshaped, shrunk, of a constant
x = realized(A)
same(x.to("PYTHON"), A)
same(x.reshape(6, 4).to("PYTHON") * 2, A.reshape(6, 4) * 2)
same(x[1:3].to("PYTHON"), A[1:3])
same(Tensor.full((3, 2), 7.0).to("PYTHON") + 1, np.full((3, 2), 8.0))
same(Tensor(3.0, device="CPU").to("PYTHON") * 2, np.float32(6.0))  # a scalar with a device: a copy of a constant
same(Tensor(3.0).to("PYTHON") * 2, np.float32(6.0))  # a Python scalar has no device: nothing to copy

# several devices: a shrink across the shard axis (replicated: each device gathers the pieces it needs), and
# operands sharded on different axes (resharded to the last one's)
D2 = ("CPU", "CPU:1")
same(Tensor(A).shard(D2, axis=0)[1:3] * 2, A[1:3] * 2)
same(Tensor(A).shard(D2, axis=0) + Tensor(A).shard(D2, axis=1), A + A)

# empty tensors
same(Tensor.zeros(0, 4).sum(0), np.zeros(4))
same(Tensor.zeros(0, 3).pad(((1, 1), (0, 0))) + 1, np.ones((2, 3)))

# symbolic shapes: a variable bound to a value
n = UOp.variable("n", 1, 4).bind(3)
same(x.shrink(((0, n), None)).sum(0), A[:3].sum(0))

# sums of aranges in closed form, and products
r = Tensor.arange(12)
same(r.sum(), np.arange(12).sum())
same((r - 3).sum(), (np.arange(12) - 3).sum())
same((-r).sum(), -np.arange(12).sum())
same((r * 3).sum(), (np.arange(12) * 3).sum())
same(Tensor.arange(20).reshape(4, 5).sum(1), np.arange(20).reshape(4, 5).sum(1))
same(Tensor.arange(20).reshape(4, 5).sum(), np.arange(20).sum())
same(Tensor.arange(6).pad(((2, 2),)) * 2, np.pad(np.arange(6), (2, 2)) * 2)
same(x.prod(1), A.prod(1), rtol=1e-3)
same(Tensor([1, 2, 3]).cast("float32") * 2, np.array([2.0, 4.0, 6.0]))

# padding read through unary ops, on both sides of comparisons, and pads that read nothing
xp = x.pad(((1, 1), (2, 0)))
Ap = np.pad(A, ((1, 1), (2, 0)))
same(xp.exp(), np.exp(Ap), rtol=1e-3)
same((xp < 0.5).where(1.0, 0.0), (Ap < 0.5).astype(np.float32))
same((0.5 < xp).where(1.0, 0.0), (0.5 < Ap).astype(np.float32))
same(x.pad(((0, 0), (0, 6)))[:, 6:] + 1, np.ones((4, 6)))
same((xp * 2).max(1), (Ap * 2).max(1))
same(x.contiguous().contiguous() + Tensor.full((4, 6), 2.0).contiguous(), A + 2)
# a buffer assigned what an assign through contiguous() (the buffer itself) wrote: one kernel
d = realized(A.copy())
d_alias = d.contiguous()
d_alias.assign(realized(A * 5))
assert len(Tensor.schedule(d.assign(d_alias))) == 1
same(d, A * 5)
# a contiguous value is stored once; assigning a buffer its own value is free
b = realized(A.copy())
same((b * 2).contiguous().contiguous(), A * 2)
same(b.assign(b - 0.0), A)
same(b.assign(b), A)
# so is assigning it a value that is itself exactly: x * 1, x / 1, -(-x), max(x, x), where(c, x, x), i + 0
same(b.assign(b * 1), A)
same(b.assign(b / 1), A)
same(b.assign(-(-b)), A)
same(b.assign(b.maximum(b)), A)
same(b.assign((b > 0).where(b, b)), A)
i = realized(np.arange(6, dtype=np.int32))
same(i.assign(i + 0), np.arange(6))
# one value assigned twice stores once; a sum or max over a broadcast axis is the value (times its size)
c = realized(A.copy())
v2 = (realized(-A) * 2).contiguous()
c.assign(v2)
same(c.assign(v2), -A * 2)
same(x.reshape(4, 6, 1).expand(4, 6, 5).sum(2), A * 5)
same(x.reshape(4, 6, 1).expand(4, 6, 5).max(2), A)
# average pooling divides by the count of its window: a sum of 1.0 over two ranges, one product
same(x.reshape(1, 1, 4, 6).avg_pool2d(kernel_size=(2, 3), stride=1).reshape(3, 4),
     sum(A[i:i + 3, j:j + 4] for i in range(2) for j in range(3)) / 6)
# indexing by a tensor is a pick of one element (no loop over the axis), also where the sum upcasts (int8, half);
# an index past the axis reads 0
H = (np.arange(24).reshape(6, 4) - 9).astype(np.float16)
picks = np.array([[5, -1], [0, 2]], np.int32)
same(realized(H)[Tensor(picks)], H[picks])
same(realized(H.astype(np.int8))[Tensor(picks)], H.astype(np.int8)[picks])
same(realized(A)[Tensor([3, 4, -5])], np.stack([A[3], np.zeros(6, np.float32), np.zeros(6, np.float32)]))
# a slice of whole rows copied to another device is read from its offset (no kernel makes it first)
same(realized(A)[1:3].to("CPU:1"), A[1:3])
# x ** 0.5 is numpy's sqrt (nan at -inf, -0.0 at -0.0), not C's pow
with np.errstate(invalid="ignore"):
    edge = np.array([-np.inf, -0.0, 0.0, 2.0, np.inf], np.float32)
    np.testing.assert_array_equal(realized(edge).pow(0.5).numpy(), edge ** 0.5)
    checked += 1
print(f"{checked} feature programs equal numpy")
