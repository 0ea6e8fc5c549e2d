"""A causal pre-norm transformer block (multi-head self-attention, then a GELU MLP), forward pass.

    rulec run examples/transformer_block.py --check

runs it and checks every realized tensor against a float64 numpy evaluation; `python` runs it too.
"""
import numpy as np

from rulec import Tensor

B, T, D, HEADS = 4, 128, 256, 4  # batch, sequence length, model width, attention heads


class Block:
    def __init__(self, d: int, heads: int):
        scale = 1 / np.sqrt(d)
        self.heads = heads
        self.ln1_w, self.ln1_b = Tensor.ones(d), Tensor.zeros(d)
        self.ln2_w, self.ln2_b = Tensor.ones(d), Tensor.zeros(d)
        self.wqkv = Tensor.randn(d, 3 * d) * scale
        self.wo = Tensor.randn(d, d) * scale
        self.w1, self.b1 = Tensor.randn(d, 4 * d) * scale, Tensor.zeros(4 * d)
        self.w2, self.b2 = Tensor.randn(4 * d, d) * (scale / 2), Tensor.zeros(d)

    def attention(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        hd = d // self.heads
        qkv = x.layernorm().linear(self.ln1_w, self.ln1_b) @ self.wqkv
        q, k, v = [qkv[:, :, i * d:(i + 1) * d].reshape(b, t, self.heads, hd).permute(0, 2, 1, 3) for i in range(3)]
        # position i attends to positions j <= i
        future = Tensor.arange(t).reshape(t, 1) < Tensor.arange(t).reshape(1, t)
        scores = (q @ k.permute(0, 1, 3, 2)) * (1 / np.sqrt(hd))
        att = future.where(-float("inf"), scores).softmax(-1)
        return (att @ v).permute(0, 2, 1, 3).reshape(b, t, d) @ self.wo

    def mlp(self, x: Tensor) -> Tensor:
        return (x.layernorm().linear(self.ln2_w, self.ln2_b).linear(self.w1, self.b1)).gelu().linear(self.w2, self.b2)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attention(x)
        return x + self.mlp(x)


if __name__ == "__main__":
    Tensor.manual_seed(0)
    block = Block(D, HEADS)
    x = Tensor.randn(B, T, D)
    out = block(x)
    print(f"kernels: {len(out.schedule())}")
    y = out.numpy()
    print(f"output {y.shape}: mean {y.mean():+.5f}, std {y.std():.5f}")
