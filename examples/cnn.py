"""A small convolutional network's forward pass: two 3x3 convolutions with ReLU (the second with stride
2), global average pooling, and a linear classifier.

    rulec run examples/cnn.py --check
"""
import numpy as np

from rulec import Tensor

BATCH, CHANNELS, SIZE, CLASSES = 8, 3, 32, 10

if __name__ == "__main__":
    Tensor.manual_seed(2)
    c1 = Tensor.randn(16, CHANNELS, 3, 3) * np.sqrt(2 / (CHANNELS * 9))
    c2 = Tensor.randn(32, 16, 3, 3) * np.sqrt(2 / (16 * 9))
    head = Tensor.randn(32, CLASSES) * np.sqrt(1 / 32)
    images = Tensor.rand(BATCH, CHANNELS, SIZE, SIZE)

    h = images.conv2d(c1, Tensor.zeros(16), padding=1).relu()
    h = h.conv2d(c2, Tensor.zeros(32), stride=2, padding=1).relu()  # (8, 32, 16, 16)
    features = h.mean(axis=(2, 3))
    logits = features @ head
    print("feature map:", h.shape, "logits:", logits.shape)
    print("log-probabilities of the first image:", np.round(logits.log_softmax(-1).numpy()[0], 3).tolist())
