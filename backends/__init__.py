"""Kernel backends (C, CUDA, Metal, OpenCL). Filled in by the codegen issue."""
