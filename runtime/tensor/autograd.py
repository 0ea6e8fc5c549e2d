"""Automatic differentiation (issue 11 §1): `backward()`, `gradient()`, `.grad`, `requires_grad`.

`Autograd` is a base class of `Tensor` (runtime/tensor/tensor.py).
"""
from __future__ import annotations


class Autograd:
    __slots__ = ()
