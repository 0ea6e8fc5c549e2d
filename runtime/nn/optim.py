"""Optimizers, as tinygrad 0.14's `nn.optim`: SGD (momentum, nesterov, weight decay), Adam and AdamW.

An optimizer updates each parameter in place (`assign`) from its `.grad`. `step()` realizes the update;
`schedule_step()` returns the tensors one step realizes (the parameters and the optimizer's own state),
so the update can be realized together with other work.
"""
from __future__ import annotations

from typing import Sequence

from rulec.runtime.tensor.tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


def _zeros_like(p: Tensor) -> Tensor:
    """Optimizer state for `p`, on its device; for a multi-device parameter, laid out as it is (its
    devices and shard axis: docs/multi-device.md)."""
    return p.zeros_like().realize()


def _ones(dtype, device) -> Tensor:
    """A one-element buffer of ones on `device` (replicated on a tuple of devices)."""
    return Tensor.ones(1, dtype=dtype, device=device).contiguous().realize()


class Optimizer:
    def __init__(self, params: Sequence[Tensor], lr: float):
        # parameters that asked not to be trained are left out; the others are trained (tinygrad's rule:
        # requires_grad None means "yes, once an optimizer holds it"). A tensor marked `is_param_(False)`
        # (BatchNorm's running statistics) is not trained, but realized with each step, as in tinygrad.
        unique: list[Tensor] = []
        self.state: list[Tensor] = []
        for p in params:
            if not getattr(p, "is_param", True):
                if all(p is not q for q in self.state):
                    self.state.append(p)
                continue
            if getattr(p, "requires_grad", None) is None:
                try:
                    p.requires_grad = True
                except AttributeError:
                    pass
            if getattr(p, "requires_grad", True) is not False and all(p is not q for q in unique):
                unique.append(p)
        if not unique:
            raise ValueError("an optimizer needs at least one parameter that requires a gradient")
        self.params = unique
        self.lr = float(lr)
        self.buffers: list[Tensor] = []  # the optimizer's own state (momenta), realized with each step

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        Tensor.realize(*self.schedule_step())

    def schedule_step(self) -> list[Tensor]:
        missing = [i for i, p in enumerate(self.params) if p.grad is None]
        if missing:
            raise RuntimeError(f"optimizer step: parameters {missing[:5]} have no gradient (call backward() first)")
        self._update()
        return self.params + self.buffers + self.state

    def _update(self) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """p -= lr * g, with g = grad + weight_decay * p, through momentum (optionally Nesterov's)."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, classic: bool = False, device: str | None = None, fused: object = None):
        super().__init__(params, lr)
        self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
        self.b = [_zeros_like(p) for p in self.params] \
            if momentum else []
        self.buffers = list(self.b)

    def _update(self) -> None:
        for i, p in enumerate(self.params):
            g = p.grad + self.wd * p if self.wd else p.grad
            if self.momentum:
                self.b[i].assign(self.momentum * self.b[i] + g)
                g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
            p.assign((p - self.lr * g).cast(p.dtype))


class Adam(Optimizer):
    """Adam: bias-corrected first and second moments; AdamW adds decoupled weight decay. (`device` and
    `fused` are accepted for tinygrad's signature: state lives on each parameter's device.)"""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, device: str | None = None, fused: object = None):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.wd = b1, b2, eps, 0.0
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]
        # b1**t and b2**t live in buffers, updated in place: the step's kernels are the same every step
        # (constants that changed with t would make new kernels, compiled again, at every step)
        dtype = self.params[0].dtype
        self.b1_t = _ones(dtype, self.params[0].device)
        self.b2_t = _ones(dtype, self.params[0].device)
        self.buffers = self.m + self.v + [self.b1_t, self.b2_t]

    def _update(self) -> None:
        self.b1_t.assign(self.b1_t * self.b1)
        self.b2_t.assign(self.b2_t * self.b2)
        c1, c2 = 1 - self.b1_t, 1 - self.b2_t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.assign(self.b1 * m + (1 - self.b1) * g)
            v.assign(self.b2 * v + (1 - self.b2) * (g * g))
            up = (m / c1) / ((v / c2).sqrt() + self.eps)
            if self.wd:
                up = up + self.wd * p
            p.assign((p - self.lr * up).cast(p.dtype))


class AdamW(Adam):
    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01, device: str | None = None, fused: object = None):
        super().__init__(params, lr, b1, b2, eps)
        self.wd = weight_decay
