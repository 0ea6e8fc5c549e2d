"""Random programs on two devices (docs/multi-device.md): the random programs of test_schedule_properties.py,
replayed with every input sharded over CPU and CPU:1 on a drawn axis (or replicated). Each op gives the
result numpy gives, or a MultiDeviceError when it has no per-device form (a pad or shrink of the shard
axis, two values split on different axes), and then the values built on it are not built. At every
realize point, each value that was built equals numpy, its lazy evaluation of the logical graph equals
numpy, and every kernel runs on one device."""
from __future__ import annotations

import numpy as np
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from budget import examples
from rulec import Tensor
from rulec.runtime.tensor.multi import MultiDeviceError
from test_schedule_properties import ELEMENTWISE, MOVEMENT, OPS, REDUCE, SETTINGS, K, assert_value, inp, programs

D2 = ("CPU", "CPU:1")


def replay(prog, data) -> int:
    """Run `prog` sharded; returns how many values were checked."""
    note(prog.code())
    tens: dict[int, Tensor] = {}
    arrs: dict[int, np.ndarray] = {}
    checked = 0
    for ins in prog.instrs:
        srcs = [s for s in ins.srcs if not isinstance(s, K)]
        if ins.op == "input":
            arrs[ins.out] = inp(*ins.arg)
            shape = arrs[ins.out].shape
            axis = data.draw(st.sampled_from([None] + [i for i, n in enumerate(shape) if n % 2 == 0]))
            tens[ins.out] = Tensor(arrs[ins.out]).shard(D2, axis)
        elif ins.op == "realize":
            outs = [s for s in ins.srcs if s in tens]
            if not outs:
                continue
            for s in outs:
                m = prog.meta[s]
                assert_value(tens[s].lazy_numpy(), arrs[s], m, f"lazy_numpy of v{s}")
            items = Tensor.schedule(*(tens[s] for s in outs))
            assert all(len({b.src[1].arg for b in it.buffers if len(b.src) > 1}) == 1 for it in items if not it.is_copy)
            Tensor.realize(*(tens[s] for s in outs))
            for s in outs:
                assert_value(tens[s].numpy(), arrs[s], prog.meta[s], f"realized v{s}")
                checked += 1
        elif all(s in tens for s in srcs):
            tfn, nfn, _ = OPS[ins.op]
            get = lambda env, s: s.v if isinstance(s, K) else env[s]  # noqa: E731
            with np.errstate(all="raise"):
                arrs[ins.out] = np.asarray(nfn(ins.arg, *(get(arrs, s) for s in ins.srcs)))
            try:
                tens[ins.out] = tfn(ins.arg, *(get(tens, s) for s in ins.srcs))
            except MultiDeviceError as e:
                event(f"refused: {str(e).split(' ')[0]}")
    event(f"values checked: {min(checked, 3)}{'+' if checked >= 3 else ''}")
    return checked


@settings(max_examples=examples(60), **SETTINGS)
@given(programs(MOVEMENT + ELEMENTWISE + REDUCE, contiguous=True, steps=(1, 6), max_outputs=2), st.data())
def test_sharded_programs_equal_numpy(prog, data):
    replay(prog, data)
