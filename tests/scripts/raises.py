"""A program that fails with a shape error, for the tool tests."""
from rulec import Tensor


def build():
    return Tensor.ones(2, 3) + Tensor.ones(4, 5)


build()
