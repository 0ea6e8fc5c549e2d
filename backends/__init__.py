"""Kernel backends: one folder per language (c, opencl, cuda, metal) with its backend.yaml, Jinja templates
and runner or checker; the renderer (render.py), the devices (device.py), and kernel_text, the C-like
printer of kernel ASTs (docs/backends.md)."""
