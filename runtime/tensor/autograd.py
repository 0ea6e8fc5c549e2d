"""Automatic differentiation (issue 11 §1): `backward()`, `gradient()`, `.grad`, `requires_grad`.

`Autograd` is a base class of `Tensor` (runtime/tensor/tensor.py). The derivative of each op is a rule
of `rules/gradient.yaml`; this module is the stateful part (docs/autograd.md):

1. the nodes on a path from the root to a target, in reverse topological order (a DETACH cuts the path);
2. for each edge (node f, its source i) on such a path, a carrier `GRADIENT(f, grad(f), arg=i)` with the
   source's dtype, where grad(f) is the sum (ADD) of the carriers of f's consumers;
3. one sources-first rewrite of every target's gradient with the `gradient` rule set, which turns each
   carrier into an expression of the forward graph, and drops the NOOPs ("no gradient") from the sums.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rulec.runtime.engine.artifacts import shipped_ruleset
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.tensor.live import all_tensors, graph_for_gradients, made_from, stored_graphs

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor


class GradientError(RuntimeError):
    """A gradient that cannot be taken: a non-scalar root without a gradient, a non-float tensor, an op
    that has no rule in rules/gradient.yaml."""


class NonScalarRootError(GradientError, AssertionError):
    """backward() or gradient() without a gradient on a root that is not a scalar: a GradientError, and
    an AssertionError as tinygrad raises for it."""


def _target_path(root: UOp, targets: set[UOp]) -> list[UOp]:
    """The nodes of `root`'s graph that have a target at or below them through no DETACH, in topological
    order (sources first). A DETACH that is itself a target is on the path: only what is below it is cut."""
    on_path: dict[UOp, bool] = {}
    for u in root.toposort():
        on_path[u] = u in targets or (u.op is not Ops.DETACH and any(on_path[s] for s in u.src))
    return [u for u, yes in on_path.items() if yes]


def _carriers(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
    """Each node on a target path -> its gradient as a sum of GRADIENT carriers (not yet rewritten)."""
    path = _target_path(root, targets)
    on_path = set(path)
    grads: dict[UOp, UOp] = {root: root_grad} if root in on_path else {}
    for f in reversed(path):
        up = grads.get(f)
        if up is None:
            continue
        for i, s in enumerate(f.src):
            if s not in on_path:
                continue
            g = UOp(Ops.GRADIENT, s.dtype, (f, up), i)
            grads[s] = g if s not in grads else UOp(Ops.ADD, s.dtype, (grads[s], g))
    return grads


def compute_gradients(root: UOp, root_grad: UOp, targets: list[UOp]) -> list[UOp | None]:
    """d root / d target for each target, given the gradient of `root`; None where it does not depend on
    the target (or only through ops without a gradient)."""
    grads = _carriers(root, root_grad, set(targets))
    wanted = [grads[t] for t in targets if t in grads]
    if not wanted:
        return [None] * len(targets)
    done = graph_rewrite(UOp.sink(*wanted), shipped_ruleset("gradient"), name="gradient")
    result = dict(zip([t for t in targets if t in grads], done.src))
    left = next((u for u in done.toposort() if u.op is Ops.GRADIENT), None)
    if left is not None:
        op = left.src[0].op.name
        raise GradientError(f"no gradient rule for {op} (source {left.arg}) in rules/gradient.yaml")
    return [None if (g := result.get(t)) is None or g.op is Ops.NOOP else g for t in targets]


class Autograd:
    """`backward`, `gradient`, `.grad` and `requires_grad` of `Tensor`."""

    __slots__ = ("_grad", "_requires_grad", "_is_param")

    def _init_autograd(self, requires_grad: bool | None) -> None:
        if requires_grad is not None and not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad must be True, False or None, not {type(requires_grad).__name__}")
        self._grad: Tensor | None = None
        self._requires_grad = requires_grad

    @property
    def grad(self) -> Tensor | None:
        """The gradient `backward()` accumulated here, or None."""
        return getattr(self, "_grad", None)

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, Autograd):
            raise TypeError(f"grad must be a Tensor or None, not {type(value).__name__}")
        if value is not None and value.shape != self.shape:  # type: ignore[attr-defined]
            raise ValueError(f"grad of shape {value.shape} for a tensor of shape {self.shape}")  # type: ignore[attr-defined]
        self._grad = value

    @property
    def requires_grad(self) -> bool | None:
        """None (the default: tinygrad 0.14, every float tensor with a device gets a gradient), True, or
        False (backward() leaves this tensor's .grad alone, as PyTorch and older tinygrad)."""
        return getattr(self, "_requires_grad", None)

    @requires_grad.setter
    def requires_grad(self, value: bool | None) -> None:
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"requires_grad must be True, False or None, not {type(value).__name__}")
        self._requires_grad = value

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self  # type: ignore[return-value]

    @property
    def is_param(self) -> bool:
        """Whether an optimizer given this tensor trains it (True, the default) or only realizes it with
        each step (False: state such as BatchNorm's running statistics), as tinygrad 0.14's."""
        return getattr(self, "_is_param", True)

    @is_param.setter
    def is_param(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"is_param must be True or False, not {type(value).__name__}")
        self._is_param = value

    def is_param_(self, is_param: bool = True) -> Tensor:
        self.is_param = is_param
        return self  # type: ignore[return-value]

    def detach(self) -> Tensor:
        """The same values, with no gradient flowing back through them."""
        me: Any = self
        return made_from(type(me)(UOp(Ops.DETACH, me.dtype, (me.uop,))), me)

    def contiguous_backward(self) -> Tensor:
        """The same values; the gradient that flows back through it is stored to a buffer first (as
        tinygrad: the backward pass gets a kernel boundary there)."""
        me: Any = self
        return type(me)(UOp(Ops.CONTIGUOUS_BACKWARD, me.dtype, (me.uop,)))

    def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
        """d self / d target for each target, as new lazy tensors (nothing is stored); zeros for a target
        self does not depend on. Without `gradient`, self must be a scalar (its gradient is 1)."""
        me: Any = self
        cls = type(me)  # the Tensor class, without importing tensor.py (which imports this module)
        for i, t in enumerate(targets):
            if not isinstance(t, Autograd):
                raise TypeError(f"gradient() takes Tensors; target {i + 1} is {type(t).__name__}")
        if not me.dtype.is_float or any(not t.dtype.is_float for t in targets):
            names = ", ".join(t.dtype.name for t in (me, *targets))
            raise GradientError(f"only float tensors have gradients (dtypes {names})")
        root_grad = _root_gradient(me, gradient)
        stored = stored_graphs()  # a target read before (`c.numpy()`) is what it was computed from
        grads = compute_gradients(graph_for_gradients(me, stored), root_grad.uop,
                                  [graph_for_gradients(t, stored) for t in targets])
        out = []
        for t, g in zip(targets, grads):
            if isinstance(t.device, tuple):  # a multi-device tensor's gradient is laid out as it is
                out.append(importlib.import_module("rulec.runtime.tensor.multi").like(cls(g), t) if g is not None
                           else t.zeros_like())
            else:
                where = t.device or (root_grad.device if isinstance(root_grad.device, str) else None)
                out.append(cls(g) if g is not None else cls.zeros(t.shape, dtype=t.dtype, device=where))
        return out

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """Accumulate d self / d t into `t.grad` for every live float tensor `t` with a device that self
        depends on (not those with requires_grad=False). Without `gradient`, self must be a scalar."""
        me: Any = self
        stored = stored_graphs()
        nodes = set(graph_for_gradients(me, stored).toposort())
        need = [t for t in list(all_tensors) if t.dtype.is_float and t.device is not None
                and t.requires_grad is not False and graph_for_gradients(t, stored) in nodes]
        for t, g in zip(need, me.gradient(*need, gradient=_root_gradient(me, gradient, on_device=True))):
            t.grad = g if t.grad is None else t.grad + g
        return me


def _root_gradient(root: Any, gradient: Any, on_device: bool = False) -> Tensor:
    """The gradient of the root: 1 for a scalar (on the root's device when `on_device`: backward() puts
    each .grad there), else the given tensor (same shape, cast to its dtype)."""
    if gradient is None:
        if root.shape != ():
            raise NonScalarRootError(f"backward() without a gradient needs a scalar, but the shape is {root.shape}: "
                                     f"reduce it (.sum(), .mean()) or pass gradient=")
        if isinstance(root.device, tuple) or not on_device:
            # no device: a constant fits any layout, and gradient() of a value made only of constants
            # (d sum(x) / dx) has no device and stores nothing, as tinygrad 0.14's
            return type(root)(1.0, dtype=root.dtype)
        return type(root).full((), 1.0, dtype=root.dtype, device=root.device)
    if not isinstance(gradient, Autograd):
        raise TypeError(f"gradient must be a Tensor, not {type(gradient).__name__}")
    if gradient.shape != root.shape and _without_ones(gradient.shape) == _without_ones(root.shape):
        gradient = gradient.reshape(root.shape)  # (1,) for a scalar: the same values, as tinygrad takes them
    if gradient.shape != root.shape:
        raise ValueError(f"gradient of shape {gradient.shape} for a tensor of shape {root.shape}")
    return gradient.cast(root.dtype)


def _without_ones(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)
