"""Matrix factorizations built from Tensor ops: `qr`, `svd` and `newton_schulz` (tinygrad 0.14's API).

Every routine works on the last two axes and broadcasts over the leading (batch) axes. They unroll a fixed
number of steps into the lazy graph, so their cost is known from the shape alone:
* `qr`: Householder reflections, one per column; Q is square (m x m), R is m x n.
* `svd`: a QR first (so a tall matrix's U comes out square and orthogonal), then one-sided Jacobi on the
  square factor: pairs of columns are rotated until the columns are orthogonal (a fixed count of sweeps,
  each a round-robin of rounds of disjoint pairs rotated at once by one matrix); the column norms are the
  singular values, sorted in descending order.
* `newton_schulz`: iterates an odd matrix polynomial that drives the singular values towards 1.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from rulec.runtime.tensor.tensor import Tensor

JACOBI_SWEEPS = 8  # one-sided Jacobi converges quadratically: float32 needs far fewer sweeps than this


class LinalgError(ValueError, AssertionError):
    """A factorization of a tensor with fewer than two axes (tinygrad asserts; rulec says which shape)."""


def _check_matrix(x: Tensor, what: str) -> None:
    if x.ndim < 2:
        raise LinalgError(f"{what} needs a tensor of two or more axes (a batch of matrices), got shape {x.shape}")


def _batch_eye(T: type, n: int, like: Tensor) -> Tensor:
    return T.eye(n, dtype=like.dtype).reshape((1,) * (like.ndim - 2) + (n, n)).expand(like.shape[:-2] + (n, n))


def _nonzero_or_one(x: Tensor) -> Tensor:
    """x where it is not 0, else 1: a safe divisor whose quotient is masked out afterwards."""
    return (x == 0).where(1.0, x)


class LinalgOps:
    __slots__ = ()

    def qr(self: Tensor) -> tuple[Tensor, Tensor]:
        """A = Q @ R with Q orthogonal (m x m) and R upper triangular (m x n), by Householder reflections."""
        _check_matrix(self, "qr")
        T = type(self)
        m, n = self.shape[-2], self.shape[-1]
        R, Q = self, _batch_eye(T, m, self)
        for k in range(min(m, n)):
            R, Q = _householder_step(R, Q, k)
        return Q, R

    def svd(self: Tensor, full_matrices: bool = True) -> tuple[Tensor, Tensor, Tensor]:
        """A = U @ diag(S) @ Vh, S descending. full_matrices: U is m x m and Vh n x n; else k = min(m, n)
        columns of U and rows of Vh."""
        _check_matrix(self, "svd")
        m, n = self.shape[-2], self.shape[-1]
        if m < n:  # the transpose's factors, swapped: A^T = U S Vh gives A = Vh^T S U^T
            U, S, Vh = self.transpose(-2, -1).svd(full_matrices)
            return Vh.transpose(-2, -1), S, U.transpose(-2, -1)
        return _tall_svd(self, full_matrices)

    def newton_schulz(self: Tensor, steps: int, params: Sequence[float], eps: float = 1.0e-7) -> Tensor:
        """`steps` iterations of G <- sum_i params[i] * (G G^T)^i G from G = A / ||A||_F: with params that
        map [0, 1] towards 1 (as (2, -1.5, 0.5)), G approaches the orthogonal factor of A."""
        _check_matrix(self, "newton_schulz")
        if self.shape[-2] > self.shape[-1]:
            return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
        G = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
        for _ in range(steps):
            gram, term = G @ G.transpose(-2, -1), G
            total = term * params[0]
            for p in params[1:]:
                term = gram @ term
                total = total + term * p
            G = total
        return G


def _householder_step(R: Tensor, Q: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Zero column k of R below the diagonal with the reflection H = I - 2 v v^T / (v^T v); Q <- Q H."""
    x = R[..., k:, k]
    norm = x.square().sum(-1, keepdim=True).sqrt()
    head = x[..., :1]
    sign = (head < 0).where(-1.0, 1.0)  # the sign that avoids cancellation (0 counts as +)
    v = x + sign * norm * _first_unit(type(R), x)
    vv = v.square().sum(-1, keepdim=True)
    scale = (vv == 0).where(0.0, 2.0 / _nonzero_or_one(vv))  # a zero column needs no reflection
    v = v.pad((None,) * (v.ndim - 1) + ((k, 0),)).unsqueeze(-1)  # full length m, zeros above row k
    w = v * scale.unsqueeze(-1)
    R = R - w @ (v.transpose(-2, -1) @ R)
    Q = Q - (Q @ v) @ w.transpose(-2, -1)
    return R, Q


def _first_unit(T: type, x: Tensor) -> Tensor:
    """e_1 with x's length, broadcast over x's batch axes."""
    return T.eye(x.shape[-1], dtype=x.dtype)[0]


def _tall_svd(A: Tensor, full_matrices: bool) -> tuple[Tensor, Tensor, Tensor]:
    """svd of an m x n matrix with m >= n: A = Q R, then one-sided Jacobi on the n x n top of R."""
    T = type(A)
    m, n = A.shape[-2], A.shape[-1]
    Q, R = A.qr()
    W, V = R[..., :n, :], _batch_eye(T, n, A)
    for _ in range(JACOBI_SWEEPS):
        for pairs in _round_robin(n):
            W, V = _jacobi_round(W, V, pairs)
        W, V = W.contiguous(), V.contiguous()
    S, order = W.square().sum(-2).sqrt().sort(dim=-1, descending=True)
    cols = order.unsqueeze(-2).expand(A.shape[:-2] + (n, n))
    Ur = W.gather(-1, cols) / _nonzero_or_one(S).unsqueeze(-2)  # a zero singular value leaves its column 0
    V = V.gather(-1, cols)
    # U = Q @ diag(Ur, I): the left vectors of R, completed by Q's last m - n columns
    block = Ur.pad((None,) * (A.ndim - 2) + ((0, m - n), (0, m - n))) + _batch_eye(T, m, A) - \
        _batch_eye(T, n, A).pad((None,) * (A.ndim - 2) + ((0, m - n), (0, m - n)))
    U = Q @ block
    if not full_matrices:
        U = U[..., :, :n]
    return U, S, V.transpose(-2, -1)


def _round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint column pairs that together meet every pair once (the circle method; an odd n
    sits one column out each round)."""
    players = list(range(n)) + ([None] if n % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        half = len(players) // 2
        pairs = [(players[i], players[-1 - i]) for i in range(half)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1]] + players[1:-1]
    return rounds


def _selector(T: type, n: int, cols: list[int], like: Tensor) -> Tensor:
    """An n x len(cols) matrix whose column j picks column cols[j]: W @ it gathers those columns."""
    pick = np.zeros((n, len(cols)), dtype=np.float64)
    pick[cols, np.arange(len(cols))] = 1.0
    return T(pick).cast(like.dtype)


def _jacobi_round(W: Tensor, V: Tensor, pairs: list[tuple[int, int]]) -> tuple[Tensor, Tensor]:
    """Rotate each pair (p, q) of columns of W so that they are orthogonal, all pairs at once (they are
    disjoint); V collects the rotations."""
    T = type(W)
    n = W.shape[-1]
    Sp, Sq = _selector(T, n, [p for p, _ in pairs], W), _selector(T, n, [q for _, q in pairs], W)
    wp, wq = W @ Sp, W @ Sq
    alpha, beta = wp.square().sum(-2, keepdim=True), wq.square().sum(-2, keepdim=True)
    gamma = (wp * wq).sum(-2, keepdim=True)
    zeta = (beta - alpha) / (2 * _nonzero_or_one(gamma))
    t = (zeta < 0).where(-1.0, 1.0) / (zeta.abs() + (1 + zeta.square()).sqrt())
    t = (gamma == 0).where(0.0, t)  # already orthogonal: no rotation
    c = 1 / (1 + t.square()).sqrt()
    s = c * t
    # J = I + sum over pairs of (c - 1)(e_p e_p^T + e_q e_q^T) + s (e_p e_q^T - e_q e_p^T):
    # the new column p is c w_p - s w_q, the new q is s w_p + c w_q
    SpT, SqT = Sp.transpose(-2, -1), Sq.transpose(-2, -1)
    J = _batch_eye(T, n, W) + (Sp * (c - 1)) @ SpT + (Sq * (c - 1)) @ SqT + (Sp * s) @ SqT - (Sq * s) @ SpT
    return W @ J, V @ J
