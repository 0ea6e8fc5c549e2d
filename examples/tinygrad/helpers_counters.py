# tinygrad 0.14's helpers as its users reach for them: getenv, Context and the TRAINING setting,
# GlobalCounters (kernels run), Timing, colored; on causal self-attention over numpy inputs. It imports only
# tinygrad and numpy. Run with tinygrad (`python helpers_counters.py`) or on rulec:
# `rulec run examples/tinygrad/helpers_counters.py`. N=n sets the sequence length (default 16), TIME=1 times it.
import sys

import numpy as np

from tinygrad import Context, Device, GlobalCounters, Tensor, dtypes, getenv
from tinygrad.helpers import TRAINING, Timing, colored

N, D = getenv("N", 16), 8
rng = np.random.default_rng(2)
q, k, v = [Tensor(rng.standard_normal((1, 2, N, D)).astype(np.float32)).realize() for _ in range(3)]

GlobalCounters.reset()
with Timing("attention: ", enabled=bool(getenv("TIME"))):
  out = q.scaled_dot_product_attention(k, v, is_causal=True).realize()
print(f"attention output {out.shape}, kernels {GlobalCounters.kernel_count}")
print("first row", " ".join(f"{x:.4f}" for x in out.numpy()[0, 0, 0]))   # attends to itself only: v's first row
print("row sums", " ".join(f"{x:.4f}" for x in out.sum(axis=-1).numpy()[0, 0, :4]))

# a causal row attends only to earlier positions: the output's last row is the only one changed by v's last row
v2 = Tensor(np.concatenate([v.numpy()[:, :, :-1], np.zeros((1, 2, 1, D), np.float32)], axis=2))
changed = ((q.scaled_dot_product_attention(k, v2, is_causal=True) - out).abs() > 1e-5).any(axis=-1)
print("rows changed by v's last row", changed.numpy()[0, 0].nonzero()[0].tolist())

print("training outside a Context:", bool(TRAINING))
with Context(TRAINING=1):
  print("training inside Context(TRAINING=1):", bool(TRAINING))
  Tensor.manual_seed(getenv("SEED", 42))
  kept = (Tensor.ones(4000).dropout(0.25) != 0).mean().item()
  print(f"dropout(0.25) keeps about 3/4: {abs(kept - 0.75) < 0.05}")
print("dropout when not training is the identity:", (Tensor.ones(10).dropout(0.5) == 1).all().item())
print("default float is float32:", out.dtype == dtypes.float32)
print(colored(f"ran on {Device.DEFAULT}", "green"), file=sys.stderr)
