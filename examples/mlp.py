"""A two-layer MLP classifier's forward pass on a batch of random "images": logits, probabilities, and
the predicted classes.

    rulec run examples/mlp.py --check
"""
import numpy as np

from rulec import Tensor

BATCH, PIXELS, HIDDEN, CLASSES = 64, 784, 256, 10

if __name__ == "__main__":
    Tensor.manual_seed(1)
    w1 = Tensor.randn(PIXELS, HIDDEN) * np.sqrt(2 / PIXELS)
    b1 = Tensor.zeros(HIDDEN)
    w2 = Tensor.randn(HIDDEN, CLASSES) * np.sqrt(1 / HIDDEN)
    b2 = Tensor.zeros(CLASSES)
    images = Tensor.rand(BATCH, PIXELS)

    logits = images.linear(w1, b1).relu().linear(w2, b2)
    probs = logits.softmax(-1)
    predicted = logits.argmax(-1)
    print("probabilities sum to 1:", bool(np.allclose(probs.numpy().sum(-1), 1, atol=1e-5)))
    print("predicted classes:", predicted.numpy()[:16].tolist(), "...")
