"""Compiled C kernels under AddressSanitizer: random pad, shrink, flip and assign programs make no
out-of-bounds access (a gated load never touches memory outside its buffer), with results equal to numpy;
nor do tiles rendered as vectors (a vector load reads exactly its lanes' elements).

The kernels are built with -fsanitize=address in a subprocess that preloads the ASan runtime (a process
cannot load an ASan library otherwise); any report makes the subprocess fail.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from rulec.backends.c.runner import asan_runtime

SCRIPT = textwrap.dedent("""
    import numpy as np
    from rulec import Tensor, Device
    Device.DEFAULT = "CPU"
    rng = np.random.default_rng(7)
    for trial in range(6):
        shape = tuple(int(v) for v in rng.integers(2, 6, size=2))
        a = rng.standard_normal(shape).astype(np.float32)
        pads = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape)
        lo = [int(rng.integers(0, d)) for d in shape]
        hi = [int(rng.integers(l + 1, d + 1)) for l, d in zip(lo, shape)]
        t = Tensor(a)
        got = (t.pad(pads).flip(1) * 2).shrink(tuple((0, d) for d in (np.array(shape) + [sum(p) for p in pads]))).sum(0)
        want = (np.pad(a, pads)[:, ::-1] * 2).sum(0)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
        got = (t.shrink(tuple(zip(lo, hi))).pad(((1, 1), (0, 2))).flip(0) + 1).numpy()
        want = np.pad(a[lo[0]:hi[0], lo[1]:hi[1]], ((1, 1), (0, 2)))[::-1] + 1
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        b = Tensor(a.copy()); b.realize()
        b.assign(b.flip(0).flip(0) * 3 + 1).realize()
        np.testing.assert_allclose(b.numpy(), a * 3 + 1, rtol=1e-5, atol=1e-5)
    # tiles as vectors (backends/vectorize.py): vector loads and stores of 8 and 4 lanes, and strided tiles
    x, y = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)
    np.testing.assert_allclose((Tensor(x) @ Tensor(y)).relu().numpy(), np.maximum(x @ y, 0), rtol=1e-4, atol=1e-4)
    img, w = Tensor(rng.standard_normal((2, 3, 10, 10)).astype(np.float32), requires_grad=True), \
        Tensor(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), requires_grad=True)
    img.conv2d(w).relu().sum().backward()
    assert np.isfinite(img.grad.numpy()).all() and np.isfinite(w.grad.numpy()).all()
    print("clean")
""")


@pytest.mark.skipif(asan_runtime() is None, reason="the C compiler has no ASan runtime installed")
def test_random_pad_shrink_flip_assign_programs_are_clean_under_asan():
    env = {**os.environ, "LD_PRELOAD": asan_runtime(), "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "RULEC_CFLAGS_EXTRA": "-fsanitize=address -fno-omit-frame-pointer"}  # flags are part of the cache key
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr[-4000:]
    assert "AddressSanitizer" not in out.stderr
