"""Downloads (`fetch`, `Tensor.from_url`), file Tensors and the datasets of `nn.datasets`, without a network:
sources are file:// URLs, and the datasets are small synthetic files of the real formats, kept where a
download would be."""
from __future__ import annotations

import gzip
import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import rulec.compat as compat
from rulec import Tensor, dtypes
from rulec.runtime.nn import datasets
from rulec.runtime.nn.state import tar_extract
from rulec.runtime.tensor.downloads import FetchError, cache_name, downloads_dir, fetch

UNREACHABLE = "http://127.0.0.1:9/"  # the discard port: nothing listens, so a download here fails at once


def test_a_download_is_kept_and_read_back_without_its_source(tmp_path):
    src = tmp_path / "weights.bin"
    src.write_bytes(b"\x01\x02\x03")
    kept = fetch(src.as_uri())
    assert kept.parent == downloads_dir() and kept.read_bytes() == b"\x01\x02\x03"
    src.unlink()
    assert fetch(src.as_uri()) == kept and kept.read_bytes() == b"\x01\x02\x03"


def test_gunzip_stores_the_contents_unzipped_and_sha256_checks_them(tmp_path):
    src = tmp_path / "data.gz"
    src.write_bytes(gzip.compress(b"hello world"))
    assert fetch(src.as_uri(), gunzip=True).read_bytes() == b"hello world"
    other = tmp_path / "other.gz"
    other.write_bytes(gzip.compress(b"tampered"))
    with pytest.raises(FetchError, match="sha256"):
        fetch(other.as_uri(), gunzip=True, sha256="0" * 64)
    assert not (downloads_dir() / cache_name(other.as_uri(), gunzip=True)).exists()  # nothing half-kept


def test_a_failed_download_names_the_url_and_where_to_put_the_file(tmp_path):
    url = (tmp_path / "missing.gz").as_uri()
    with pytest.raises(FetchError) as e:
        fetch(url, gunzip=True)
    target = downloads_dir() / cache_name(url, gunzip=True)
    assert url in str(e.value) and str(target) in str(e.value) and "unzipped" in str(e.value)
    assert not target.exists()
    assert not [p for p in downloads_dir().iterdir() if p.name.startswith("tmp")]  # no temporary file left


def test_a_corrupt_gzip_is_a_fetch_error(tmp_path):
    src = tmp_path / "bad.gz"
    src.write_bytes(b"not gzip at all")
    with pytest.raises(FetchError, match="bad.gz"):
        fetch(src.as_uri(), gunzip=True)


def test_files_tinygrad_downloaded_are_read_from_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    url = UNREACHABLE + "kept-by-tinygrad.gz"
    theirs = tmp_path / "tinygrad" / "downloads" / cache_name(url, gunzip=True)
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"abc")
    assert fetch(url, gunzip=True) == theirs
    with pytest.raises(FetchError):  # caching off: it must download, and cannot
        fetch(url, gunzip=True, allow_caching=False)


def test_a_local_path_is_returned_as_is():
    assert fetch("./some/file") == Path("./some/file")


def test_extract_refuses_members_outside_the_folder(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        t.addfile(info, io.BytesIO(b"hi"))
    src = tmp_path / "evil.tar"
    src.write_bytes(buf.getvalue())
    with pytest.raises(tarfile.TarError):
        fetch(src.as_uri(), extract=True)
    assert not (downloads_dir().parent / "escaped.txt").exists()


def test_extract_unpacks_once_into_a_folder(tmp_path):
    src = tmp_path / "ok.tar"
    src.write_bytes(_tar({"a/b.txt": b"xyz"}))
    folder = fetch(src.as_uri(), extract=True)
    assert (folder / "a" / "b.txt").read_bytes() == b"xyz"
    assert fetch(src.as_uri(), extract=True) == folder


def test_a_tensor_of_a_file_reads_its_bytes_as_the_dtype(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(np.arange(5, dtype=np.float32).tobytes() + b"\x07")
    assert Tensor(f).dtype == dtypes.uint8 and Tensor(f).shape == (21,)
    np.testing.assert_array_equal(Tensor(f, dtype=dtypes.float32).numpy(), np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(Tensor(f)[20:].numpy(), [7])
    np.testing.assert_array_equal(Tensor.from_url(f.as_uri(), dtype=dtypes.int16).numpy(),
                                  np.frombuffer(f.read_bytes()[:20], np.int16))


def test_tar_extract_gives_each_file_and_refuses_other_tensors():
    files = tar_extract(Tensor(_tar({"x/one.bin": b"\x01", "two.bin": b"\x02\x03"})))
    assert sorted(files) == ["two.bin", "x/one.bin"]
    np.testing.assert_array_equal(files["two.bin"].numpy(), [2, 3])
    with pytest.raises(ValueError, match="uint8"):
        tar_extract(Tensor([1.0, 2.0]))


# ------------------------------------------------------------------ the datasets, from kept synthetic files


def _keep(monkeypatch, tmp_path, url: str, contents: bytes) -> None:
    """`contents` kept as tinygrad would have downloaded `url` (unzipped)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = tmp_path / "tinygrad" / "downloads" / cache_name(url, gunzip=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(contents)


def _idx(arr: np.ndarray) -> bytes:
    """An IDX file: magic (0, 0, type 8 = ubyte, ndim), one big-endian uint32 per dimension, the bytes."""
    return bytes([0, 0, 8, arr.ndim]) + np.array(arr.shape, ">u4").tobytes() + arr.astype(np.uint8).tobytes()


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def mnist_files(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (64, 28, 28)),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, 64),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (16, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 16)}
    for name, arr in arrays.items():
        _keep(monkeypatch, tmp_path, datasets.MNIST_URL + name, _idx(arr))
    return arrays


def test_mnist_reads_the_idx_files(mnist_files):
    x_train, y_train, x_test, y_test = datasets.mnist()
    assert x_train.shape == (64, 1, 28, 28) and x_test.shape == (16, 1, 28, 28) and x_train.dtype == dtypes.uint8
    np.testing.assert_array_equal(x_train.numpy()[:, 0], mnist_files["train-images-idx3-ubyte.gz"])
    np.testing.assert_array_equal(y_test.numpy(), mnist_files["t10k-labels-idx1-ubyte.gz"])


def test_a_beautiful_mnist_style_script_runs_unchanged_on_the_kept_files(mnist_files):
    before = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "tinygrad"}
    compat.install()
    try:
        from tinygrad import Context, Tensor as TgTensor, nn
        from tinygrad.nn.datasets import mnist

        X_train, Y_train, X_test, Y_test = mnist()
        model = [nn.Conv2d(1, 4, 3), TgTensor.relu, lambda x: x.max_pool2d((2, 2)), lambda x: x.flatten(1),
                 nn.Linear(4 * 13 * 13, 10)]
        opt = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-2)
        losses = []
        with Context(TRAINING=1):
            for _ in range(3):
                samples = TgTensor.randint(32, high=X_train.shape[0])
                opt.zero_grad()
                loss = X_train[samples].float().sequential(model).sparse_categorical_crossentropy(Y_train[samples])
                loss.backward()
                opt.step()
                losses.append(loss.item())
        acc = (X_test.float().sequential(model).argmax(axis=1) == Y_test).mean().item()
    finally:
        compat.uninstall()
    assert {n: m for n, m in sys.modules.items() if n.split(".")[0] == "tinygrad"} == before
    assert all(np.isfinite(losses)) and 0.0 <= acc <= 1.0


def test_cifar_splits_records_into_label_and_pixels(monkeypatch, tmp_path):
    rng = np.random.default_rng(1)
    batches = {f"data_batch_{i}": rng.integers(0, 256, (3, 3073)) for i in range(1, 6)}
    batches["test_batch"] = rng.integers(0, 256, (2, 3073))
    archive = _tar({f"cifar-10-batches-bin/{k}.bin": v.astype(np.uint8).tobytes() for k, v in batches.items()})
    _keep(monkeypatch, tmp_path, datasets.CIFAR_URL, archive)
    x_train, y_train, x_test, y_test = datasets.cifar()
    train = np.concatenate([batches[f"data_batch_{i}"] for i in range(1, 6)])
    assert x_train.shape == (15, 3, 32, 32) and x_test.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(y_train.numpy(), train[:, 0])
    np.testing.assert_array_equal(x_test.numpy().reshape(2, -1), batches["test_batch"][:, 1:])
