"""Softmax, log-softmax and an affine layer norm over the rows of a matrix: the normalizations every
model uses, each fused by the scheduler into few kernels.

    rulec run examples/softmax_layernorm.py --check
"""
from rulec import Tensor

ROWS, COLS = 512, 1024

if __name__ == "__main__":
    Tensor.manual_seed(3)
    x = Tensor.randn(ROWS, COLS) * 4
    gain, bias = Tensor.rand(COLS) + 0.5, Tensor.randn(COLS) * 0.1

    probs = x.softmax(-1)
    logp = x.log_softmax(-1)
    normed = x.layernorm().linear(gain, bias)
    for name, t in (("softmax", probs), ("log_softmax", logp), ("layernorm", normed)):
        print(f"{name:12} {len(t.schedule())} kernel(s)")
    p, lp, n = probs.numpy(), logp.numpy(), normed.numpy()
    print(f"rows of softmax sum to {p.sum(-1).min():.6f}..{p.sum(-1).max():.6f}")
    print(f"layernorm output mean {n.mean():+.4f}")
