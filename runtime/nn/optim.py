"""Optimizers, as tinygrad 0.14's `nn.optim`: `LARS` (trust-ratio SGD) and its special cases `SGD`
(momentum, Nesterov, weight decay) and `Muon` (momentum orthogonalized by Newton-Schulz steps); `LAMB`
(trust-ratio Adam) and its special cases `Adam` and `AdamW`; `OptimizerGroup`, several optimizers
stepped as one.

An optimizer updates each parameter in place (`assign`) from its `.grad`. `step()` realizes the update;
`schedule_step()` returns the tensors one step realizes (the parameters, the tensors passed that are not
parameters, such as BatchNorm's running statistics, and the optimizer's own state), so the update can be
realized together with other work.

The learning rate `lr` is a one-element Tensor (at least float32, float64 for float64 parameters), as in
tinygrad: a schedule may `opt.lr.assign(...)` it, and a step's kernels stay the same when it changes. The
optimizer's state has each parameter's dtype and device. Unlike tinygrad, a step outside
`Context(TRAINING=1)` is allowed (docs/tinygrad.md).
"""
from __future__ import annotations

from typing import Any, Sequence

from rulec.runtime.tensor.tensor import Tensor

__all__ = ["Optimizer", "OptimizerGroup", "SGD", "LARS", "Muon", "Adam", "AdamW", "LAMB"]


def _zeros_like(p: Tensor) -> Tensor:
    """Optimizer state for `p`, on its device; for a multi-device parameter, laid out as it is (its
    devices and shard axis: docs/multi-device.md)."""
    return p.zeros_like().realize()


def _ones(dtype, device) -> Tensor:
    """A one-element buffer of ones on `device` (replicated on a tuple of devices)."""
    return Tensor.ones(1, dtype=dtype, device=device).contiguous().realize()


def _norm(t: Tensor) -> Tensor:
    return t.square().sum().sqrt()


def _ratio_or_one(num: Tensor, den: Tensor) -> Tensor:
    """num / den where both are positive, else 1 (a trust ratio that leaves a zero tensor's step alone)."""
    return ((num > 0) & (den > 0)).where(num / den.maximum(1e-30), 1.0)


class Optimizer:
    def __init__(self, params: Sequence[Tensor], lr: float, device: Any = None, fused: Any = None):
        if lr < 0:
            raise ValueError(f"an optimizer needs a learning rate >= 0, got {lr}")
        # parameters that asked not to be trained are left out; the others are trained (tinygrad's rule:
        # requires_grad None means "yes, once an optimizer holds it"). A tensor marked `is_param_(False)`
        # (BatchNorm's running statistics) is not trained, but realized with each step, as in tinygrad.
        unique: list[Tensor] = []
        self.buffers: list[Tensor] = []
        for p in params:
            if not getattr(p, "is_param", True):
                if all(p is not q for q in self.buffers):
                    self.buffers.append(p)
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
        self.device = self.params[0].device
        wide = any(p.dtype.name == "float64" for p in self.params)
        self.lr = Tensor([float(lr)], dtype="float64" if wide else "float32", device=self.device).contiguous().realize()
        self._own: list[Tensor] = []  # the optimizer's own state (momenta), realized with each step

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        Tensor.realize(*self.schedule_step())

    def schedule_step(self) -> list[Tensor]:
        missing = [i for i, p in enumerate(self.params) if p.grad is None]
        if missing:
            raise RuntimeError(f"optimizer step: parameters {missing[:5]} have no gradient (call backward() first)")
        for p, up in zip(self.params, self._updates()):
            p.assign((p.detach() - up).cast(p.dtype))
        return self.params + self.buffers + self._own

    def _lr(self) -> Tensor | float:
        """The learning rate as a scalar (a one-element Tensor viewed as 0-d, or a float set by the user)."""
        return self.lr.reshape(()) if isinstance(self.lr, Tensor) else self.lr

    def _updates(self) -> list[Tensor]:
        """What each parameter loses this step (its new state assigned on the way)."""
        raise NotImplementedError


class OptimizerGroup(Optimizer):
    """Several optimizers (over different parameters) zeroed and stepped as one; `group[i]` is the i-th."""

    def __init__(self, *optimizers: Optimizer):  # its members hold the learning rates and the state
        self.optimizers = optimizers
        self.params = [p for o in optimizers for p in o.params]
        self.buffers = [b for o in optimizers for b in o.buffers]

    def __getitem__(self, i: int) -> Optimizer:
        return self.optimizers[i]

    def zero_grad(self) -> None:
        for o in self.optimizers:
            o.zero_grad()

    def schedule_step(self) -> list[Tensor]:
        return [t for o in self.optimizers for t in o.schedule_step()]


class LARS(Optimizer):
    """SGD scaled per parameter by a trust ratio tcoef * |p| / (|g| + wd * |p|) (1 when tcoef is 0 or a
    norm is 0). Weight decay is added to the gradient first (`pre_wd`) or to the step after momentum;
    `classic` momentum accumulates lr-scaled steps; `ns_coefficients` orthogonalizes the step with
    `ns_steps` Newton-Schulz iterations (Muon)."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4,
                 ns_steps: int = 0, ns_coefficients: Sequence[float] | None = None, nesterov: bool = False,
                 classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001, device: Any = None, fused: Any = None):
        if momentum < 0:
            raise ValueError(f"momentum must be >= 0, got {momentum}")
        super().__init__(params, lr, device, fused)
        self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
        self.ns_steps, self.ns_coefficients, self.pre_wd, self.tcoef = ns_steps, ns_coefficients, pre_wd, tcoef
        self.b = [_zeros_like(p) for p in self.params] if momentum else []
        self._own = list(self.b)

    def _updates(self) -> list[Tensor]:
        return [self._update(i, p.detach(), p.grad) for i, p in enumerate(self.params)]

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        lr = self._lr()
        trust = _ratio_or_one(self.tcoef * _norm(p), _norm(g) + self.wd * _norm(p)) if self.tcoef else 1.0
        if self.pre_wd and self.wd:
            g = g + self.wd * p
        if self.classic:
            g = g * trust * lr
        if self.momentum:
            self.b[i].assign(self.momentum * self.b[i] + g)
            g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
        if self.ns_coefficients:
            g = newton_schulz(g.reshape(g.shape[0], -1), self.ns_steps, self.ns_coefficients).reshape(g.shape)
        if not self.classic:
            g = g * trust * lr
        if not self.pre_wd and self.wd:
            g = g + self.wd * lr * p
        return g


class SGD(LARS):
    """p -= lr * g, with g = grad + weight_decay * p, through momentum (optionally Nesterov's); `classic`
    momentum accumulates lr * g instead of g."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, classic: bool = False, device: Any = None, fused: Any = None):
        super().__init__(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True,
                         tcoef=0.0, device=device, fused=fused)


class Muon(LARS):
    """SGD whose (Nesterov) momentum is orthogonalized by Newton-Schulz steps, weight decay after it."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1,
                 ns_steps: int = 5, ns_coefficients: Sequence[float] = (3.4445, -4.775, 2.0315), nesterov: bool = True,
                 device: Any = None, fused: Any = None):
        if fused:
            raise ValueError("Muon cannot be fused (it orthogonalizes each parameter's step on its own)")
        super().__init__(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False,
                         pre_wd=False, tcoef=0.0, device=device, fused=fused)


def newton_schulz(g: Tensor, steps: int, coefficients: Sequence[float], eps: float = 1e-7) -> Tensor:
    """Approximately orthogonalize the 2-d `g`: scaled to unit Frobenius norm, then `steps` times
    X <- sum_k c_k (X X^T)^k X. A tall matrix is done transposed (X X^T is then the small side)."""
    if g.shape[0] > g.shape[1]:
        return newton_schulz(g.transpose(), steps, coefficients, eps).transpose()
    x = g / (_norm(g) + eps)
    for _ in range(steps):
        gram = x @ x.transpose()
        term, total = x, None
        for c in coefficients:
            total = c * term if total is None else total + c * term
            term = gram @ term
        x = total
    return x


class LAMB(Optimizer):
    """Adam's bias-corrected step plus weight_decay * p, scaled per parameter by the trust ratio
    |p| / |step| (1 when a norm is 0); `adam=True` leaves the ratio out (AdamW; Adam without decay)."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False, device: Any = None, fused: Any = None):
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        super().__init__(params, lr, device, fused)
        self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]
        # b1**t and b2**t live in buffers, updated in place: the step's kernels are the same every step
        # (constants that changed with t would make new kernels, compiled again, at every step)
        dtype = self.params[0].dtype
        self.b1_t = _ones(dtype, self.params[0].device)
        self.b2_t = _ones(dtype, self.params[0].device)
        self._own = [self.b1_t, self.b2_t] + self.m + self.v

    def _updates(self) -> list[Tensor]:
        self.b1_t.assign(self.b1_t * self.b1)
        self.b2_t.assign(self.b2_t * self.b2)
        c1, c2 = 1 - self.b1_t, 1 - self.b2_t
        out = []
        for p, m, v in zip(self.params, self.m, self.v):
            g, w = p.grad, p.detach()
            m.assign(self.b1 * m + (1 - self.b1) * g)
            v.assign(self.b2 * v + (1 - self.b2) * (g * g))
            up = (m / c1) / ((v / c2).sqrt() + self.eps)
            if self.wd:
                up = up + self.wd * w
            trust = 1.0 if self.adam else _ratio_or_one(_norm(w), _norm(up))
            out.append(self._lr() * trust * up)
        return out


class Adam(LAMB):
    """Adam: bias-corrected first and second moments. (`device` and `fused` are accepted for tinygrad's
    signature: state lives on each parameter's device.)"""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, device: Any = None, fused: Any = None):
        super().__init__(params, lr, b1, b2, eps, 0.0, adam=True, device=device, fused=fused)


class AdamW(LAMB):
    """Adam with decoupled weight decay."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01, device: Any = None, fused: Any = None):
        super().__init__(params, lr, b1, b2, eps, weight_decay, adam=True, device=device, fused=fused)
