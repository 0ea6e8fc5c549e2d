"""More of the Tensor API, as tinygrad 0.14 has it (issue 11 §3), each method built from existing ops.

`MoreOps` is a base class of `Tensor` (runtime/tensor/tensor.py); its methods use only the public Tensor
methods and the Tensor class itself (imported where needed, to keep this module importable first).
"""
from __future__ import annotations


class MoreOps:
    __slots__ = ()
