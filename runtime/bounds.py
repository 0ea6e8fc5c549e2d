"""vmin/vmax: interval analysis of integer and boolean expressions.

Integer division and modulo follow C (truncate toward zero), the semantics of
every backend rulec generates code for.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .ops import Ops

if TYPE_CHECKING:
    from .uop import UOp


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


def _limits(u: UOp) -> tuple:
    return u.dtype.scalar.min, u.dtype.scalar.max


def bounds_sources(u: UOp) -> tuple[UOp, ...]:
    """The sources whose bounds `bounds(u)` reads (UOp.vmin fills them first, without recursion)."""
    op = u.op
    if u.dtype.scalar.kind == "float" or op is Ops.CONST or op is Ops.DEFINE_VAR:
        return ()
    if op in (Ops.BIND, Ops.RANGE, Ops.SPECIAL, Ops.NEG, Ops.CAST):
        return u.src[:1]
    if op is Ops.WHERE or len(u.src) == 2:
        return u.src
    return ()


def bounds(u: UOp) -> tuple:
    """(vmin, vmax) of `u`, as tight as cheap reasoning allows; dtype limits otherwise."""
    op, dt = u.op, u.dtype.scalar
    if dt.kind == "float":
        if op is Ops.CONST:
            return u.arg, u.arg
        return _limits(u)
    if op is Ops.CONST:
        return u.arg, u.arg
    if op is Ops.DEFINE_VAR:
        return u.arg[1], u.arg[2]
    if op is Ops.BIND:
        return u.src[0].vmin, u.src[0].vmax
    if op is Ops.RANGE:
        return 0, u.src[0].vmax - 1
    if op is Ops.SPECIAL:
        return 0, u.src[0].vmax - 1 if u.src else _limits(u)[1]
    if not u.src:
        return _limits(u)
    s = u.src
    if op is Ops.NEG:
        # clipped: -vmin leaves the dtype for an unsigned dtype, or for the most negative value
        return _clip(u, -s[0].vmax, -s[0].vmin)
    if op is Ops.CAST:
        lo, hi = s[0].vmin, s[0].vmax
        dlo, dhi = _limits(u)
        if isinstance(lo, float) or lo < dlo or hi > dhi:
            return dlo, dhi
        return (bool(lo), bool(hi)) if dt.kind == "bool" else (lo, hi)
    if op is Ops.WHERE:
        c = s[0]
        if c.vmin == c.vmax:
            return (s[1].vmin, s[1].vmax) if c.vmin else (s[2].vmin, s[2].vmax)
        return min(s[1].vmin, s[2].vmin), max(s[1].vmax, s[2].vmax)
    if len(s) != 2:
        return _limits(u)
    (alo, ahi), (blo, bhi) = (s[0].vmin, s[0].vmax), (s[1].vmin, s[1].vmax)
    if op is Ops.ADD:
        return _clip(u, alo + blo, ahi + bhi)
    if op is Ops.SUB:
        return _clip(u, alo - bhi, ahi - blo)
    if op is Ops.MUL:
        corners = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return _clip(u, min(corners), max(corners))
    if op is Ops.MAX:
        return max(alo, blo), max(ahi, bhi)
    if op is Ops.IDIV:
        if blo > 0 or bhi < 0:
            corners = tuple(c_div(a, b) for a in (alo, ahi) for b in (blo, bhi))
            return min(corners), max(corners)
        return _limits(u)
    if op is Ops.MOD:
        if blo > 0:
            m = bhi - 1
            lo = 0 if alo >= 0 else max(alo, -m)
            hi = 0 if ahi <= 0 else min(ahi, m)
            if alo >= 0 and ahi < blo:
                return alo, ahi
            return lo, hi
        return _limits(u)
    if op is Ops.CMPLT:
        if ahi < blo:
            return True, True
        if alo >= bhi:
            return False, False
        return False, True
    if op in (Ops.CMPNE, Ops.CMPEQ):
        disjoint = ahi < blo or bhi < alo
        same_point = alo == ahi == blo == bhi
        ne = (True, True) if disjoint else (False, False) if same_point else (False, True)
        return ne if op is Ops.CMPNE else (not ne[1], not ne[0])
    if dt.kind == "bool" and op in (Ops.AND, Ops.OR, Ops.XOR):
        if op is Ops.AND:
            return alo and blo, ahi and bhi
        if op is Ops.OR:
            return alo or blo, ahi or bhi
        if alo == ahi and blo == bhi:
            v = alo != blo
            return v, v
        return False, True
    if op is Ops.AND and alo >= 0 and blo >= 0:
        return 0, min(ahi, bhi)
    if op in (Ops.OR, Ops.XOR) and alo >= 0 and blo >= 0:
        return 0, (1 << max(ahi, bhi).bit_length()) - 1
    return _limits(u)


def _clip(u: UOp, lo, hi) -> tuple:
    dlo, dhi = _limits(u)
    if lo < dlo or hi > dhi:
        return dlo, dhi
    return lo, hi
