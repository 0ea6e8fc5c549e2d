"""Device names, as tinygrad's, and the default device (`$DEV`, else CPU).

The runners live in rulec.backends.device; this module is only the names, so that buffers and tensors
(lower layers) can say where they live.
"""
from __future__ import annotations

import os

DEVICES = ("CPU", "CL", "CUDA", "METAL", "PYTHON")
ALIASES = {"CLANG": "CPU", "C": "CPU", "OPENCL": "CL", "GPU": "CL", "NV": "CUDA", "PY": "PYTHON"}


def canonical(device: str) -> str:
    """`device` as one of DEVICES ("cl" and "CL:0" are CL); ValueError naming the choices."""
    if not isinstance(device, str):
        raise TypeError(f"a device is a string such as 'CPU', got {type(device).__name__}")
    name = device.split(":")[0].upper()
    name = ALIASES.get(name, name)
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {', '.join(DEVICES)}")
    return name


class _Device:
    """`Device.DEFAULT`: the device of new tensors, from $DEV (read when first asked), settable."""

    def __init__(self) -> None:
        self._default: str | None = None

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - tinygrad's spelling
        if self._default is None:
            self._default = canonical(os.environ.get("DEV") or "CPU")
        return self._default

    @DEFAULT.setter
    def DEFAULT(self, device: str) -> None:  # noqa: N802
        self._default = canonical(device)

    def canonicalize(self, device: str | None) -> str:
        return self.DEFAULT if device is None else canonical(device)


Device = _Device()
