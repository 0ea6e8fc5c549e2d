"""Pickling tensors, in the style of tinygrad's test_pickle and test_to_numpy. The programs are our own;
numpy computes every expected value."""
from __future__ import annotations

import pickle
import tracemalloc

import numpy as np

from rulec import Tensor, dtypes
from rulec.runtime.ir.ops import Ops


def _buffers(t: Tensor) -> set:
    return {u for u in t.uop.toposort() if u.op is Ops.BUFFER}


def test_a_pickled_view_keeps_its_values_after_the_source_is_freed():
    t = Tensor.arange(10).clone().realize()
    view = t[3:5].contiguous().realize()
    data = pickle.dumps(view)
    del t, view
    assert pickle.loads(data).tolist() == [3, 4]


def test_an_unrealized_graph_loads_and_realizes():
    a = Tensor([1.0, 2.0, 3.0])
    t = (a * 2 + 1).exp()
    loaded = pickle.loads(pickle.dumps(t))
    np.testing.assert_allclose(loaded.numpy(), np.exp(np.array([1.0, 2.0, 3.0], np.float32) * 2 + 1), rtol=1e-6)
    v = Tensor.ones(4, 5).contiguous().sum(1)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(v)).numpy(), [5.0] * 4)


def test_a_loaded_tensor_is_a_copy_not_an_alias_of_the_live_buffer():
    t = Tensor([1, 2, 3], dtype=dtypes.int32).realize()
    loaded = pickle.loads(pickle.dumps(t))
    assert not _buffers(loaded) & _buffers(t)
    t.assign(Tensor([7, 8, 9], dtype=dtypes.int32)).realize()
    assert loaded.tolist() == [1, 2, 3]
    assert t.tolist() == [7, 8, 9]


def test_tensors_pickled_together_still_share_their_buffer():
    t = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
    a, b = pickle.loads(pickle.dumps([t, t[1:3] * 10]))
    assert _buffers(a) == _buffers(b)
    np.testing.assert_array_equal(b.numpy(), [20.0, 30.0])


def test_gradient_state_survives_a_pickle():
    x = Tensor([1.0, 2.0]).requires_grad_()
    (x * x).sum().backward()
    x2 = pickle.loads(pickle.dumps(x))
    assert x2.requires_grad is True
    np.testing.assert_array_equal(x2.grad.numpy(), [2.0, 4.0])


def test_out_of_band_buffers_are_not_held_twice():
    n, m = 4, 250_000
    ts = [Tensor.rand(m).realize() for _ in range(n)]
    tracemalloc.start()
    try:
        data = pickle.dumps(ts, protocol=5, buffer_callback=lambda pb: pb.release())
        assert tracemalloc.get_traced_memory()[1] < n * m * 4
        tracemalloc.reset_peak()
        loaded = pickle.loads(data, buffers=(pickle.PickleBuffer(bytearray(m * 4)) for _ in range(n)))
        # the out-of-band buffers themselves are n*m*4 bytes; loading keeps them as the storage
        assert tracemalloc.get_traced_memory()[1] < n * m * 4 + m * 4
    finally:
        tracemalloc.stop()
    assert [t.shape for t in loaded] == [(m,)] * n
    np.testing.assert_array_equal(loaded[0].numpy(), np.zeros(m, np.float32))


def test_numpy_of_a_tensor_is_a_plain_picklable_array():
    out = Tensor.ones((1, 3, 4096)).realize().numpy()
    back = pickle.loads(pickle.dumps(np.copy(out)))
    assert type(out) is np.ndarray and back.shape == (1, 3, 4096) and (back == 1).all()
