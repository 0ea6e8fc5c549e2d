"""The derivative rules of rules/gradient.yaml, each on a small program whose gradient is checked against
central finite differences in float64: a corpus for `rulec stats --fail-on-dead` (tests/test_autograd.py
checks them more widely)."""
import numpy as np

from rulec import Tensor
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

rng = np.random.default_rng(3)
X = rng.uniform(0.5, 2.0, (3, 4))
checked = 0


def check(f, x0=X, h=1e-6, rtol=1e-5):
    """d sum(f(x)) / dx against central differences."""
    global checked
    x = Tensor(x0.copy()).realize()
    got = f(x).sum().gradient(x)[0].numpy()
    flat, want = x0.reshape(-1), np.zeros(x0.size)
    for i in range(x0.size):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += h
        minus[i] -= h
        want[i] = (f(Tensor(plus.reshape(x0.shape))).sum().numpy() - f(Tensor(minus.reshape(x0.shape))).sum().numpy()) / (2 * h)
    np.testing.assert_allclose(got, want.reshape(x0.shape), rtol=rtol, atol=1e-6)
    checked += 1


check(lambda x: x.maximum(x * 0.5 + 0.4))
check(lambda x: x ** 2.5)
check(lambda x: Tensor(2.0) ** x)
check(lambda x: x.reciprocal())
check(lambda x: x.sin())
check(lambda x: x.sqrt())
check(lambda x: x.trunc() + x * 2)
check(lambda x: x.cast("float32").cast("float64") * x, h=1e-2, rtol=1e-4)  # (float32 steps: a wide h)
check(lambda x: x.prod(1))
check(lambda x: x.flip(1) * Tensor(np.arange(12.0).reshape(3, 4)))
check(lambda x: (x * 2).contiguous() * x)  # of a realized x, contiguous() is x itself: a computed value
check(lambda x: Tensor(UOp(Ops.CONTIGUOUS_BACKWARD, x.dtype, (x.uop,))) * x)
check(lambda x: (x < 1.0).where(x, x * 3))  # the comparison and the condition carry no gradient
check(lambda x: x.to("PYTHON") * 2)
check(lambda x: (x < 1.0).cast("float64") * x + x)  # a comparison used as a value: no gradient through it
# several devices (docs/multi-device.md): through a gather, the sharding's MULTI and its parts' copies
D2 = ("CPU", "CPU:1")
check(lambda x: (x.shard(D2, axis=1) * x.shard(D2, axis=1)).to("CPU"))
check(lambda x: x.shard(D2).exp().sum(0).to("CPU:1"))  # replicated: part 0 takes the gradient
check(lambda x: x.shard(D2, axis=1).shards[1].to("CPU") * 3)  # one device's part (an MSELECT)
# through an assign: the value's gradient is what the assign reads back; the target (x itself here) gets none
x = Tensor(X.copy()).realize()
assigned = Tensor(UOp(Ops.ASSIGN, x.dtype, (x.uop, (x * 3).uop)))
np.testing.assert_allclose(assigned.sum().gradient(x)[0].numpy(), np.full((3, 4), 3.0))
checked += 1
# a float16 max with 3000 ties: each gets 1/3000 (counted in float32: a float16 count stops at 2048)
h = Tensor.ones(3000, dtype="float16").contiguous()
np.testing.assert_allclose(h.max().gradient(h)[0].float().sum().numpy(), 1.0, atol=2e-3)
checked += 1
print(f"{checked} gradient programs equal finite differences")
