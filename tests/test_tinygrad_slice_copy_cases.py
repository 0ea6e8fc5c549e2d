"""Copies of slices between devices, in the style of tinygrad's test_slice_copy: a view that reads one run
of a buffer's elements in order is copied from its offset with no kernel (tinygrad 0.14 schedules the
same programs with no kernel for the copy's source). The programs are our own; numpy gives the values."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor

M = np.arange(24, dtype=np.float32).reshape(4, 6)


def kernels(*ts: Tensor) -> int:
    return sum(1 for item in Tensor.schedule(*ts) if not item.is_copy)


@pytest.mark.parametrize("view", [
    lambda t: t.reshape(24)[13:15], lambda t: t[1:3], lambda t: t[2], lambda t: t[1:2, 2:5],
    lambda t: t.reshape(2, 3, 4)[1:2, 1:3], lambda t: t.reshape(2, 12)[1:, 4:10].reshape(3, 2),
])
def test_a_run_of_a_buffer_is_copied_with_no_kernel(view):
    src = Tensor(M.copy()).realize()
    out = view(src).to("CPU:1")
    assert kernels(out) == 0
    np.testing.assert_array_equal(out.numpy(), view(M))


def test_a_permuted_view_that_reads_one_run_is_copied_with_no_kernel():
    src = Tensor(M.copy()).realize()
    out = src.reshape(2, 3, 4).permute(1, 0, 2)[1:2, 1:2].to("CPU:1")
    assert kernels(out) == 0
    np.testing.assert_array_equal(out.numpy(), M.reshape(2, 3, 4).transpose(1, 0, 2)[1:2, 1:2])


@pytest.mark.parametrize("view", [lambda t: t[:, 1:3], lambda t: t.T[1:3], lambda t: t[::2]])
def test_a_strided_view_still_gets_its_kernel(view):
    src = Tensor(M.copy()).realize()
    out = view(src).to("CPU:1")
    assert kernels(out) == 1
    np.testing.assert_array_equal(out.numpy(), view(M))


def test_a_flipped_run_still_gets_its_kernel():
    src = Tensor(M.copy()).realize()
    out = src.flip(1)[0].to("CPU:1")
    assert kernels(out) == 1
    np.testing.assert_array_equal(out.numpy(), M[0, ::-1])


@pytest.mark.parametrize("src_dev,dst_dev", [("CPU", "CPU:1"), ("CPU:1", "CPU")])
def test_assigning_a_copied_slice_into_a_slice_is_one_kernel(src_dev, dst_dev):
    dst = Tensor(np.full((4, 6), -1.0, np.float32), device=dst_dev).realize()
    src = Tensor(M.copy(), device=src_dev).realize()
    write = dst[1:2, 2:5].assign(src[2:3, 1:4].to(dst_dev))
    assert kernels(write) == 1
    write.realize()
    want = np.full((4, 6), -1.0, np.float32)
    want[1:2, 2:5] = M[2:3, 1:4]
    np.testing.assert_array_equal(dst.numpy(), want)
    np.testing.assert_array_equal(src.numpy(), M)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.int32, np.int64])
def test_odd_offsets_and_lengths_copy_exact_bytes(dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 100, 40).astype(dtype)
    b = rng.integers(0, 100, 40).astype(dtype)
    dst, src = Tensor(a.copy(), device="CPU:1").realize(), Tensor(b.copy()).realize()
    dst[3:20].assign(src[19:36].to("CPU:1")).realize()
    a[3:20] = b[19:36]
    assert dst.numpy().tobytes() == a.tobytes()


def test_a_copy_reads_the_source_before_a_later_assign_in_the_same_realize():
    b = Tensor(np.arange(6, dtype=np.float32)).realize()
    c = b[1:3].to("CPU:1")
    b.assign(b * 10)
    Tensor.realize(c, b)
    np.testing.assert_array_equal(c.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.numpy(), np.arange(6) * 10)
