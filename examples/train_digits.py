"""Train a small CNN on scikit-learn's bundled 8x8 handwritten digits (1797 images, shipped inside the
package: no download), with rulec's nn, Adam and the compiled CPU device.

    pip install -e '.[examples]' && python examples/train_digits.py        # or: rulec run examples/train_digits.py

Written as a tinygrad 0.14 script would be; it reaches about 97-98% test accuracy.
"""
import time

import numpy as np
from rich.progress import Progress

from rulec import Tensor, nn
from rulec.helpers import Context
from rulec.nn.optim import Adam
from rulec.nn.state import get_parameters


class Net:
    def __init__(self):
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.c1(x).relu()
        x = self.c2(x).relu().max_pool2d(2)  # (n, 32, 4, 4)
        return self.fc(x.reshape(x.shape[0], -1))


def load():
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    split = int(len(x) * 0.8)
    return x[:split], y[:split], x[split:], y[split:]


if __name__ == "__main__":
    Tensor.manual_seed(0)
    x_train, y_train, x_test, y_test = load()
    model = Net()
    opt = Adam(get_parameters(model), lr=3e-3)
    batch, epochs = 128, 16
    steps = epochs * (len(x_train) // batch)
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    with Context(TRAINING=1), Progress(transient=True) as bar:
        task = bar.add_task("training", total=steps)
        for step in range(steps):
            idx = rng.integers(0, len(x_train), batch)
            opt.zero_grad()
            loss = model(Tensor(x_train[idx])).sparse_categorical_crossentropy(Tensor(y_train[idx]))
            loss.backward()
            Tensor.realize(loss, *opt.schedule_step())
            bar.update(task, advance=1, description=f"training, loss {loss.item():.3f}")
    predicted = model(Tensor(x_test)).argmax(-1).numpy()
    accuracy = float((predicted == y_test).mean())
    print(f"test accuracy {accuracy * 100:.1f}% ({len(y_test)} images) after {steps} steps in "
          f"{time.perf_counter() - t0:.1f} s")
