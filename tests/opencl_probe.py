"""Whether OpenCL runs here. CI installs PoCL; elsewhere a test that needs a platform skips, saying why."""
from __future__ import annotations

import pytest


def _have_opencl() -> str | None:
    try:
        import pyopencl as cl

        return None if cl.get_platforms() else "no OpenCL platform"
    except Exception as e:  # noqa: BLE001 - any failure to find a platform means: skip, saying why
        return f"OpenCL unavailable: {e}"


NO_CL = _have_opencl()
NEEDS_CL = pytest.mark.skipif(NO_CL is not None, reason=str(NO_CL))
CL = pytest.param("CL", marks=NEEDS_CL)  # the CL device, as a parametrize value that skips without one
