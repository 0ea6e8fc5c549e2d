"""Kernel backends: `kernel_text` (the C-like printer of kernel ASTs) today; C, CUDA, Metal and OpenCL come with
the codegen issue."""
