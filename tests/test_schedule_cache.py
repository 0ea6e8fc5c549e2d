"""Schedules kept by graph shape (runtime/schedule/schedule_cache.py): a graph equal to an earlier one but for
its buffers runs the earlier schedule over its own buffers. Every test compares with numpy, and the ones
about reuse count the pipeline runs."""
from __future__ import annotations

import numpy as np
import pytest

from rulec import Tensor
from rulec.runtime.device import Device
from rulec.runtime.engine.trace import tracing
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.schedule import scheduler, schedule_cache

RNG = np.random.default_rng(7)


@pytest.fixture
def runs(monkeypatch):
    """The pipeline runs of the test, counted (the cache starts empty)."""
    monkeypatch.setattr(schedule_cache, "_kept", type(schedule_cache._kept)())
    monkeypatch.setattr(schedule_cache, "ENABLED", True)
    count = [0]
    real = scheduler.run_pipeline

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(scheduler, "run_pipeline", counted)
    return count


def stored(a: np.ndarray) -> Tensor:
    return Tensor(a)  # a buffer already: nothing to schedule


def test_a_graph_over_other_buffers_reuses_the_schedule_and_gets_a_fresh_output(runs):
    a, b, c, d = (RNG.standard_normal(6).astype(np.float32) for _ in range(4))
    first = (stored(a) * stored(b)).exp().realize()
    second = (stored(c) * stored(d)).exp().realize()
    assert runs[0] == 1
    # the second output is a buffer of its own: the first keeps its values
    np.testing.assert_allclose(first.numpy(), np.exp(a * b), rtol=1e-6)
    np.testing.assert_allclose(second.numpy(), np.exp(c * d), rtol=1e-6)
    assert [u for u in first.uop.toposort() if u.op is Ops.BUFFER] != [u for u in second.uop.toposort() if u.op is Ops.BUFFER]


def test_one_buffer_read_twice_is_not_the_graph_of_two_buffers(runs):
    a, b = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    x, y = stored(a), stored(b)
    np.testing.assert_allclose((x + x.flip(0)).numpy(), a + a[::-1], rtol=1e-6)
    np.testing.assert_allclose((x + y.flip(0)).numpy(), a + b[::-1], rtol=1e-6)
    assert runs[0] == 2


@pytest.mark.parametrize("other", [np.zeros((2, 3), np.float32), np.zeros(6, np.int32), np.zeros(7, np.float32)])
def test_another_shape_dtype_or_size_is_another_schedule(runs, other):
    base = RNG.standard_normal(6).astype(np.float32)
    (stored(base) + 1).realize()
    out = stored(other) + 1
    np.testing.assert_array_equal(out.numpy(), other + 1)
    assert runs[0] == 2


def test_each_bound_value_is_its_own_schedule(runs):
    data = RNG.standard_normal((10, 4)).astype(np.float32)
    for n in (3, 7, 3):
        v = UOp.variable("n", 1, 10).bind(n)
        np.testing.assert_allclose(stored(data).shrink(((0, v), None)).sum(0).numpy(), data[:n].sum(0), rtol=1e-5)
    assert runs[0] == 2


def test_a_training_loop_schedules_its_step_once_and_matches_numpy(runs):
    x = RNG.standard_normal((8, 3)).astype(np.float32)
    y = RNG.standard_normal((8, 1)).astype(np.float32)
    w0 = RNG.standard_normal((3, 1)).astype(np.float32)
    w = stored(w0.copy())
    want = w0.copy()
    after = []
    for _ in range(5):
        # a fresh input tensor every step, as a data loader makes them
        loss = ((stored(x) @ w - stored(y)) ** 2).mean()
        grad = (2 / 8) * x.T @ (x @ want - y)
        w.assign(w - (((stored(x) @ w - stored(y)) * (2 / 8)).reshape(8, 1) * stored(x)).sum(0).reshape(3, 1) * 0.1)
        w.realize()
        loss.realize()
        want = want - grad * 0.1
        after.append(runs[0])
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-4, atol=1e-6)
    # the first step schedules its update and its loss; the second again (w was the first's assign then, a
    # buffer since); every later step reuses the second's
    assert after == [2, 4, 4, 4, 4]


def test_the_default_device_is_part_of_the_key(runs, monkeypatch):
    # a graph of constants alone is stored on the default device: another default is another schedule
    virtual = Tensor.arange(6).uop
    devices = []
    for default in ("CPU", "PYTHON", "CPU"):
        monkeypatch.setattr(Device, "DEFAULT", default)
        items, _ = scheduler.create_schedule(UOp.sink(UOp(Ops.CONTIGUOUS, virtual.dtype, (virtual,))))
        devices.append(items[0].device)
    assert devices == ["CPU", "PYTHON", "CPU"] and runs[0] == 2
    np.testing.assert_array_equal(Tensor.arange(6).numpy(), np.arange(6))


def test_a_trace_sees_every_rewrite(runs):
    a = RNG.standard_normal(4).astype(np.float32)
    (stored(a) * 2).realize()
    with tracing() as trace:
        (stored(a) * 2).realize()
    assert runs[0] == 2 and trace.events


def test_a_schedule_that_raised_is_not_kept(runs):
    x = stored(np.arange(4, dtype=np.float32))
    for _ in range(2):
        with pytest.raises(scheduler.BindMismatchError):
            a = x.shrink(((0, UOp.variable("n", 1, 4).bind(2)),)).sum()
            b = x.shrink(((0, UOp.variable("n", 1, 4).bind(3)),)).sum()
            (a + b).realize()
    assert runs[0] == 2


def test_scache_0_schedules_every_graph(runs, monkeypatch):
    monkeypatch.setattr(schedule_cache, "ENABLED", False)
    for _ in range(2):
        (stored(np.ones(3, np.float32)) + 1).realize()
    assert runs[0] == 2


def test_the_kept_schedules_are_bounded(runs, monkeypatch):
    monkeypatch.setattr(schedule_cache, "MAX_KEPT", 3)
    for n in range(1, 6):
        (stored(np.ones(n, np.float32)) + 1).realize()
    assert len(schedule_cache._kept) == 3
    (stored(np.ones(1, np.float32)) + 1).realize()  # dropped first: scheduled again
    assert runs[0] == 6


def test_a_context_turns_the_cache_off_for_its_block(runs, monkeypatch):
    from rulec.helpers import Context

    monkeypatch.setattr(schedule_cache, "ENABLED", None)
    monkeypatch.delenv("SCACHE", raising=False)
    with Context(SCACHE=0):
        for _ in range(2):
            (stored(np.ones(3, np.float32)) * 3).realize()
    assert runs[0] == 2
    for _ in range(2):
        (stored(np.ones(3, np.float32)) * 3).realize()
    assert runs[0] == 3


def test_a_pipeline_whose_stages_were_edited_in_place_is_another_key(runs):
    pipe = scheduler.schedule_pipeline()
    x = stored(np.arange(4, dtype=np.float32))
    first, _ = scheduler.create_schedule(UOp.sink((x * 2).uop), pipe)
    saved = list(pipe.stages)
    try:
        pipe.stages[:] = [s for s in pipe.stages if s.name != "assign ordering"]
        scheduler.create_schedule(UOp.sink((x * 2).uop), pipe)
    finally:
        pipe.stages[:] = saved
    assert runs[0] == 2 and len(first) == 1
