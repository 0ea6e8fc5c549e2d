"""Every public program of the kernel-count reference (tests/test_schedule_counts.py PROGRAMS), realized and
checked against numpy: a corpus for `rulec stats` (and `rulec run --check`)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_schedule_counts import PROGRAMS, T  # noqa: E402

for name, build, ref, inputs, _ in PROGRAMS:
    outs = build(*[T(a) for a in inputs])
    for got, want in zip(outs, ref(*inputs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=name)
print(f"{len(PROGRAMS)} programs equal numpy")
