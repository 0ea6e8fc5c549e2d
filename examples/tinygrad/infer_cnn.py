# Inference with tinygrad 0.14's layers (Conv2d, BatchNorm2d, Linear, LayerNorm), written as tinygrad users
# write it; it imports only tinygrad and numpy. Run with tinygrad (`python infer_cnn.py`) or on rulec:
# `rulec run examples/tinygrad/infer_cnn.py`. The weights (and BatchNorm's running statistics) are numpy's
# draws, loaded with load_state_dict, so both print the same numbers.
import numpy as np

from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.state import get_state_dict, load_state_dict


class Net:
  def __init__(self):
    self.c1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
    self.c2, self.bn2 = nn.Conv2d(8, 16, 3, stride=2), nn.BatchNorm2d(16)
    self.norm = nn.LayerNorm(16)
    self.fc = nn.Linear(16, 5)

  def __call__(self, x: Tensor) -> Tensor:
    x = self.bn1(self.c1(x)).relu().max_pool2d(2)
    x = self.bn2(self.c2(x)).silu()
    x = x.avg_pool2d(kernel_size=x.shape[2:]).flatten(1)   # global average pool
    return self.fc(self.norm(x))


def numpy_weights(model, rng):
  out = {}
  for name, t in get_state_dict(model).items():
    if name.endswith("num_batches_tracked"): out[name] = t; continue
    v = rng.standard_normal(t.shape).astype(np.float32) * 0.5
    if name.endswith("running_var"): v = np.abs(v) + 0.5   # variances are positive
    out[name] = Tensor(v)
  return out


if __name__ == "__main__":
  rng = np.random.default_rng(1)
  net = Net()
  load_state_dict(net, numpy_weights(net, rng), verbose=False)
  x = Tensor(rng.standard_normal((4, 3, 12, 12)).astype(np.float32))
  logits = net(x)                 # not training: BatchNorm uses the running statistics
  probs = logits.softmax(axis=-1)
  print("logits shape", logits.shape, "dtype", logits.dtype == dtypes.float32)
  np.set_printoptions(precision=4, suppress=True)
  print("logits\n", logits.numpy())
  print("probabilities sum to one:", np.allclose(probs.sum(axis=-1).numpy(), 1, atol=1e-5))
  print("predicted classes", probs.argmax(axis=-1).tolist())
  print("top-2 classes", [row.argsort()[::-1][:2].tolist() for row in probs.numpy()])
