"""Parameter initializers the layers use (host-drawn, through Tensor.rand)."""
from __future__ import annotations

import math
from typing import Sequence

from rulec.runtime.tensor.tensor import Tensor


def uniform(shape: Sequence[int], low: float = 0.0, high: float = 1.0) -> Tensor:
    """Uniform in [low, high), realized."""
    return (Tensor.rand(*shape) * (high - low) + low).realize()


def glorot_uniform(shape: Sequence[int]) -> Tensor:
    bound = math.sqrt(6 / (shape[0] + math.prod(shape[1:])))
    return uniform(shape, -bound, bound)
