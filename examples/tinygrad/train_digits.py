# A tinygrad 0.14 training script, written the way its users write one: it imports only tinygrad (and
# numpy, scikit-learn). Run it with tinygrad (`python train_digits.py`) or on rulec, unchanged:
# `rulec run examples/tinygrad/train_digits.py` (or `python -m rulec.compat examples/tinygrad/train_digits.py`).
# The weights start from numpy's generator and the batches are drawn by numpy, so both print the same numbers.
# STEPS=n sets the number of training steps (default 200).
import os
import tempfile

import numpy as np
from sklearn.datasets import load_digits

from tinygrad import Tensor, TinyJit, nn, GlobalCounters
from tinygrad.helpers import Context, getenv, trange
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


class Model:
  def __init__(self):
    self.layers = [nn.Conv2d(1, 8, 3), Tensor.relu, nn.Conv2d(8, 16, 3), Tensor.relu, Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(64, 10)]

  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)


def numpy_init(model, rng):
  # uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases, as the layers draw them, but from numpy
  new = {}
  for name, t in get_state_dict(model).items():
    fan_in = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else t.shape[0]
    bound = 1 / np.sqrt(fan_in)
    new[name] = Tensor(rng.uniform(-bound, bound, t.shape).astype(np.float32))
  load_state_dict(model, {**get_state_dict(model), **new}, verbose=False)


if __name__ == "__main__":
  digits = load_digits()
  X = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
  Y = digits.target.astype(np.int32)
  X_train, Y_train, X_test, Y_test = X[:1500], Y[:1500], Tensor(X[1500:]), Tensor(Y[1500:])
  rng = np.random.default_rng(getenv("SEED", 0))

  model = Model()
  numpy_init(model, rng)
  opt = nn.optim.Adam(get_parameters(model), lr=1e-2)

  @TinyJit
  def train_step(x: Tensor, y: Tensor) -> Tensor:
    with Context(TRAINING=1):
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y).backward()
      opt.step()
      return loss

  @TinyJit
  def test_accuracy() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).mean() * 100

  steps, kernels = getenv("STEPS", 200), 0
  for i in (t := trange(steps)):
    GlobalCounters.reset()
    idx = rng.integers(0, len(X_train), size=64)
    loss = train_step(Tensor(X_train[idx]), Tensor(Y_train[idx]))
    kernels = GlobalCounters.kernel_count
    if i % 20 == 19 or i == steps - 1:
      print(f"step {i+1:4d} loss {loss.item():.4f}")
    t.set_description(f"loss: {loss.item():6.3f}")
  acc = test_accuracy().item()
  print(f"test accuracy {acc:.2f}%")
  print(f"kernels in the last training step: {kernels}")

  # save, load into a fresh model, and check it predicts the same
  fn = os.path.join(tempfile.mkdtemp(), "digits.safetensors")
  safe_save(get_state_dict(model), fn)
  fresh = Model()
  load_state_dict(fresh, safe_load(fn), verbose=False)
  same = (fresh(X_test).argmax(axis=1) == model(X_test).argmax(axis=1)).mean().item()
  print(f"reloaded model agrees on {same*100:.2f}% of the test set")
