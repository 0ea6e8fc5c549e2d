"""examples/train_digits.py trains: a few dozen Adam steps of its CNN on the digits data set lower the loss
and classify most test images (the whole example reaches 98.6% in about 70 s: docs/performance.md)."""
from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the digits data set ships with scikit-learn (the test extra installs it)")

from rulec import Tensor  # noqa: E402
from rulec.helpers import Context  # noqa: E402
from rulec.nn.optim import Adam  # noqa: E402
from rulec.nn.state import get_parameters  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"))


def test_a_few_steps_of_the_digits_example_learn():
    Tensor.manual_seed(0)
    x_train, y_train, x_test, y_test = EXAMPLE["load"]()
    model = EXAMPLE["Net"]()
    opt = Adam(get_parameters(model), lr=3e-3)
    rng = np.random.default_rng(0)
    losses = []
    with Context(TRAINING=1):
        for _ in range(40):
            idx = rng.integers(0, len(x_train), 64)
            opt.zero_grad()
            loss = model(Tensor(x_train[idx])).sparse_categorical_crossentropy(Tensor(y_train[idx]))
            loss.backward()
            Tensor.realize(loss, *opt.schedule_step())
            losses.append(loss.item())
    accuracy = (model(Tensor(x_test)).argmax(-1).numpy() == y_test).mean()
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
    assert accuracy > 0.8, accuracy
