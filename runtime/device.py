"""Device names, as tinygrad's, and the default device (`$DEV`, else CPU).

The runners live in rulec.backends.device; this module is only the names, so that buffers and tensors
(lower layers) can say where they live.

A device may name an instance: `CPU:1` and `CL:2` are devices of their own (their own buffers; a copy
between two instances is a COPY), run by the runner of their backend (`CPU`, `CL`). Instance 0 is the
backend's plain name, as tinygrad 0.14 prints it: `CPU:0` is `CPU`.
"""
from __future__ import annotations

import os

DEVICES = ("CPU", "CL", "CUDA", "METAL", "PYTHON")
ALIASES = {"CLANG": "CPU", "C": "CPU", "OPENCL": "CL", "GPU": "CL", "NV": "CUDA", "PY": "PYTHON"}


def canonical(device: str) -> str:
    """`device` as a backend of DEVICES with its instance ("cl" and "CL:0" are CL, "cpu:1" is CPU:1);
    ValueError naming the choices."""
    if not isinstance(device, str):
        raise TypeError(f"a device is a string such as 'CPU', got {type(device).__name__}")
    name, sep, instance = device.partition(":")
    name = ALIASES.get(name.upper(), name.upper())
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {', '.join(DEVICES)}, "
                         f"optionally with an instance number (CPU:1)")
    if not sep:
        return name
    if not instance.isdigit():
        raise ValueError(f"device {device!r}: the instance after ':' must be a number >= 0, got {instance!r}")
    return name if int(instance) == 0 else f"{name}:{int(instance)}"


def backend_of(device: str) -> str:
    """The backend that runs `device` (CPU for CPU:1): the name without its instance."""
    return canonical(device).partition(":")[0]


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
