"""Property tests of the scheduler: random tensor programs, realized, equal numpy.

Hypothesis builds random programs over realized input tensors; each program is a list of
instructions (`Ins`) that is replayed twice: once with the `Tensor` API (scheduled into kernels by
rules/schedule/*.yaml and run on the numpy reference interpreter) and once with plain numpy. At every
realize point the outputs must equal numpy, and `lazy_numpy()` (runtime/interpret/lazy_eval.py, computed before
realization) must agree with both.

Programs:
* movement chains: reshape, permute, expand, pad (also negative, and with a fill value), shrink, flip;
* elementwise ops: + - * maximum, where, comparisons (< > == != <= >=), exp (of clipped values),
  bool -> float and exact values -> int32 casts, adding an `arange` along the last axis; reductions: sum / max over random axes with random keepdim; `.contiguous()`;
* several outputs realized together with `Tensor.realize(*outs)`, sharing subgraphs (often one output is a
  value another output reads, or a view of one), and later phases that reuse any tensor of an earlier phase
  (realized, or merely sharing realized nodes); a reduction read by several outputs.

Inputs are small integers stored as float32 (or `arange`), so a value that only went through exact
operations is computed exactly whatever the order of summation; each value carries a bound on its
magnitude and an `exact` flag. Exact values are compared for equality, and only exact values are
compared with <, == ...; values that went through exp are compared with rtol 1e-4 and an absolute
tolerance scaled by their bound.

Schedule invariants, checked on `Tensor.schedule(*outs)` before every realize: each kernel AST is a SINK
of STOREs; no kernel stores into a buffer that a live tensor already reads (there are no assigns); and
when the graph of the outputs has no REDUCE_AXIS and no CONTIGUOUS, there are at most as many kernels as
distinct outputs that compute something (elementwise and movement ops fuse into one kernel per output).
After the last realize, every input still holds its data.

When a property fails, hypothesis prints the program as Tensor code (the `note`: `T(inp(...))` inputs,
`check(...)` realize points, runnable with the helpers below); the minimized failures are kept at the end
of this file as explicit regression tests. The examples are derandomized (the same every run); to hunt
for new bugs run with RULEC_PROPERTY_SEARCH=n: n times as many examples, drawn at random
(`--hypothesis-seed=k` picks the draw).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import pytest

from budget import SEARCH, examples
from rulec import Tensor
from rulec.runtime.interpret.interpret import run_kernel as interpret_kernel
from rulec.runtime.ir.ops import Ops
from rulec.runtime.tensor import realize as realize_mod


@pytest.fixture(autouse=True, scope="module")
def compiled_kernels_against_the_interpreter():
    """Every kernel these programs run on a compiled device (CPU by default) also runs on the PYTHON
    reference interpreter, on copies of its buffers; the two must agree (floats to rounding: a compiled
    reduce adds in loop order, the interpreter pairwise)."""
    real = realize_mod.run_kernel

    def both(ast, arrays, vals, device):
        copies = [a.copy() for a in arrays]
        interpret_kernel(ast, copies, vals)
        real(ast, arrays, vals, device)
        for k, (got, want) in enumerate(zip(arrays, copies)):
            if got.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True,
                                           err_msg=f"buffer {k}: {device} against PYTHON")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"buffer {k}: {device} against PYTHON")

    realize_mod.run_kernel = both
    yield
    realize_mod.run_kernel = real

MAX_NUMEL = 1296  # 6**4: every value has at most this many elements
BOUND_LIMIT = 2 ** 22  # no value may grow beyond this: integers below 2**24 are exact in float32, nothing overflows
SETTINGS = dict(deadline=None, derandomize=not SEARCH, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])




# what realize leaves in a realized tensor (runtime/tensor/realize.py): a view of buffers and constants
VIEW_OPS = {Ops.BUFFER, Ops.UNIQUE, Ops.DEVICE, Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.RESHAPE, Ops.EXPAND,
            Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}


# ----------------------------------------------------------------------------- inputs


def inp(shape: tuple[int, ...], fill: str = "arange", seed: int = 0) -> np.ndarray:
    """Input data: `arange` (distinct integers centred on 0) or small random integers in [-3, 3]."""
    n = math.prod(shape)
    if fill == "arange":
        a = np.arange(n) - n // 2
    else:
        a = np.random.default_rng(seed).integers(-3, 4, n)
    return a.astype(np.float32).reshape(shape)


def inp_bound(shape: tuple[int, ...], fill: str) -> int:
    return max(1, math.prod(shape) // 2) if fill == "arange" else 3


def T(a: np.ndarray) -> Tensor:
    t = Tensor(a)
    t.realize()
    return t


# ----------------------------------------------------------------------------- numpy equivalents


def np_pad(x: np.ndarray, pads, value=0) -> np.ndarray:
    """Tensor.pad: negative amounts crop, then pad with `value`."""
    x = x[tuple(slice(-min(b, 0), s + min(a, 0)) for s, (b, a) in zip(x.shape, pads))]
    return np.pad(x, [(max(b, 0), max(a, 0)) for b, a in pads], constant_values=value)


def np_shrink(x: np.ndarray, bounds) -> np.ndarray:
    return x[tuple(slice(b, e) for b, e in bounds)]


def np_expand(x: np.ndarray, shape) -> np.ndarray:
    return np.broadcast_to(x.reshape((1,) * (len(shape) - x.ndim) + x.shape), shape)


def np_sum(x: np.ndarray, axes, keepdim) -> np.ndarray:
    out = np.sum(x, axis=axes, keepdims=keepdim)
    return out.astype(np.int32) if x.dtype.kind in "bi" else out


_CMP = {"<": (np.less, lambda a, b: a < b), ">": (np.greater, lambda a, b: a > b),
        "==": (np.equal, lambda a, b: a == b), "!=": (np.not_equal, lambda a, b: a != b),
        "<=": (np.less_equal, lambda a, b: a <= b), ">=": (np.greater_equal, lambda a, b: a >= b)}

# op -> (tensor function, numpy function, code template); `a` is the instruction's arg, x y z the sources
OPS: dict[str, tuple[Any, Any, str]] = {
    "reshape": (lambda a, x: x.reshape(a), lambda a, x: x.reshape(a), "{x}.reshape({a})"),
    "permute": (lambda a, x: x.permute(a), lambda a, x: np.transpose(x, a), "{x}.permute({a})"),
    "expand": (lambda a, x: x.expand(a), lambda a, x: np_expand(x, a), "{x}.expand({a})"),
    "pad": (lambda a, x: x.pad(a[0], value=a[1]), lambda a, x: np_pad(x, *a), "{x}.pad({a0}, value={a1})"),
    "shrink": (lambda a, x: x.shrink(a), lambda a, x: np_shrink(x, a), "{x}.shrink({a})"),
    "flip": (lambda a, x: x.flip(a), lambda a, x: np.flip(x, a), "{x}.flip({a})"),
    "contiguous": (lambda a, x: x.contiguous(), lambda a, x: x, "{x}.contiguous()"),
    "add": (lambda a, x, y: x + y, lambda a, x, y: x + y, "{x} + {y}"),
    "sub": (lambda a, x, y: x - y, lambda a, x, y: x - y, "{x} - {y}"),
    "mul": (lambda a, x, y: x * y, lambda a, x, y: x * y, "{x} * {y}"),
    "maximum": (lambda a, x, y: x.maximum(y), lambda a, x, y: np.maximum(x, y), "{x}.maximum({y})"),
    "cmp": (lambda a, x, y: _CMP[a][1](x, y), lambda a, x, y: _CMP[a][0](x, y), "({x} {a} {y})"),
    "where": (lambda a, c, x, y: c.where(x, y), lambda a, c, x, y: np.where(c, x, y), "{x}.where({y}, {z})"),
    "clip": (lambda a, x: x.clip(-a, a), lambda a, x: np.clip(x, -a, a), "{x}.clip(-{a}, {a})"),
    "exp": (lambda a, x: x.exp(), lambda a, x: np.exp(x), "{x}.exp()"),
    "float": (lambda a, x: x.float(), lambda a, x: x.astype(np.float32), "{x}.float()"),
    "int": (lambda a, x: x.int(), lambda a, x: x.astype(np.int32), "{x}.int()"),
    "iota": (lambda a, x: x + Tensor.arange(a[0], a[0] + x.shape[-1]), lambda a, x: x + np.arange(a[0], a[0] + x.shape[-1]),
             "{x} + Tensor.arange({a0}, {a0} + {x}.shape[-1])"),
    "sum": (lambda a, x: x.sum(a[0], keepdim=a[1]), lambda a, x: np_sum(x, *a), "{x}.sum({a0}, keepdim={a1})"),
    "max": (lambda a, x: x.max(a[0], keepdim=a[1]), lambda a, x: np.max(x, axis=a[0], keepdims=a[1]),
            "{x}.max({a0}, keepdim={a1})"),
}
MOVEMENT = ("reshape", "permute", "expand", "pad", "shrink", "flip")
ELEMENTWISE = ("add", "sub", "mul", "maximum", "cmp", "where", "exp", "float", "int", "iota")
REDUCE = ("sum", "max")


# ----------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Meta:
    shape: tuple[int, ...]
    kind: str  # "f" float32, "i" int32, "b" bool
    bound: float  # |value| <= bound
    exact: bool  # computed exactly: integer-valued, |value| <= BOUND_LIMIT, no exp on the way


@dataclass(frozen=True)
class Ins:
    op: str  # an OPS key, "input" or "realize"
    out: int | None
    srcs: tuple = ()  # value ids (int) or Python scalars wrapped in K
    arg: Any = None


@dataclass(frozen=True)
class K:
    """A Python scalar operand."""
    v: int


@dataclass
class Program:
    instrs: list[Ins] = field(default_factory=list)
    meta: dict[int, Meta] = field(default_factory=dict)
    instrs_by_out: dict[int, Ins] = field(default_factory=dict)

    def code(self) -> str:
        lines = []
        name = lambda s: repr(s.v) if isinstance(s, K) else f"v{s}"  # noqa: E731
        for i in self.instrs:
            if i.op == "input":
                lines.append(f"v{i.out} = T(inp({i.arg[0]}, {i.arg[1]!r}, {i.arg[2]}))")
            elif i.op == "realize":
                lines.append(f"check({', '.join(name(s) for s in i.srcs)})")
            else:
                srcs = [name(s) for s in i.srcs] + ["", "", ""]
                a = i.arg if i.arg is not None else ()
                a0, a1 = (a[0], a[1]) if isinstance(a, tuple) and len(a) == 2 and i.op in ("pad", "sum", "max", "iota") \
                    else (None, None)
                lines.append(f"v{i.out} = " + OPS[i.op][2].format(x=srcs[0], y=srcs[1], z=srcs[2], a=i.arg,
                                                                   a0=a0, a1=a1))
        return "\n".join(lines)


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


class Builder:
    """Draws one random program, instruction by instruction, tracking the shape and bounds of values."""

    def __init__(self, draw, ops: tuple[str, ...], contiguous: bool):
        self.draw, self.ops, self.contiguous = draw, ops, contiguous
        self.p = Program()
        self.n = 0

    # -- values

    def add(self, op: str, srcs: tuple, arg: Any, meta: Meta) -> int:
        out = self.n
        self.n += 1
        self.p.instrs.append(Ins(op, out, srcs, arg))
        self.p.instrs_by_out[out] = self.p.instrs[-1]
        self.p.meta[out] = meta
        return out

    def ancestors(self, x: int) -> set[int]:
        seen, todo = set(), [x]
        while todo:
            for s in self.p.instrs_by_out[todo.pop()].srcs:
                if isinstance(s, int) and s not in seen:
                    seen.add(s)
                    todo.append(s)
        return seen

    def input(self, shape: tuple[int, ...]) -> int:
        fill = self.draw(st.sampled_from(["arange", "random"]))
        seed = self.draw(st.integers(0, 2 ** 16)) if fill == "random" else 0
        return self.add("input", (), (shape, fill, seed), Meta(shape, "f", inp_bound(shape, fill), True))

    def pick(self, ids: list[int]) -> int:
        """A value, most recent first (shrinks toward chains)."""
        return self.draw(st.sampled_from(ids[::-1]))

    def meta(self, s) -> Meta:
        return Meta((), "f", abs(s.v), True) if isinstance(s, K) else self.p.meta[s]

    # -- operands

    def operand(self, shape: tuple[int, ...], kinds: str, exact_only: bool, same: int | None = None):
        """A second operand that broadcasts with `shape`: a scalar, `same` itself, an existing value or a fresh
        input."""
        choices = ["scalar", "same"] if same is not None else ["scalar"]
        cands = [i for i, m in self.p.meta.items() if m.kind in kinds and (m.exact or not exact_only)
                 and (b := _broadcast(shape, m.shape)) is not None and math.prod(b) <= MAX_NUMEL]
        if cands:
            choices.append("value")
        if "f" in kinds:
            choices.append("input")
        if not choices:
            return None
        c = self.draw(st.sampled_from(choices))
        if c == "scalar":
            return K(self.draw(st.integers(-3, 3)))
        if c == "same":
            return same
        if c == "value":
            return self.pick(cands)
        drop = self.draw(st.integers(0, len(shape)))  # fewer leading axes
        sub = tuple(s if self.draw(st.booleans()) else 1 for s in shape[drop:])
        return self.input(sub)

    # -- one instruction

    def step(self, ids: list[int], ops: tuple[str, ...] | None = None) -> None:
        for _ in range(8):
            op = self.draw(st.sampled_from(ops or self.ops))
            x = self.pick(ids)
            if getattr(self, "op_" + op)(x) is not None:
                break
        if self.contiguous and self.draw(st.integers(0, 5)) == 0:
            x = self.n - 1
            self.add("contiguous", (x,), None, self.p.meta[x])

    def op_reshape(self, x):
        m = self.p.meta[x]
        n = math.prod(m.shape)
        k = self.draw(st.integers(0 if n == 1 else 1, 4))
        dims = [1] * k
        for f in _prime_factors(n):
            dims[self.draw(st.integers(0, k - 1))] *= f
        if tuple(dims) == m.shape:
            return None  # no-op movement ops are not built (the frontend returns self)
        return self.add("reshape", (x,), tuple(dims), Meta(tuple(dims), m.kind, m.bound, m.exact))

    def op_permute(self, x):
        m = self.p.meta[x]
        if len(m.shape) < 2:
            return None
        order = tuple(self.draw(st.permutations(range(len(m.shape)))))
        if order == tuple(range(len(m.shape))):
            return None
        return self.add("permute", (x,), order, Meta(tuple(m.shape[i] for i in order), m.kind, m.bound, m.exact))

    def op_expand(self, x):
        m = self.p.meta[x]
        lead = self.draw(st.integers(0, 4 - len(m.shape))) if len(m.shape) < 4 else 0
        old = (1,) * lead + m.shape
        if 1 not in old:
            return None
        new = tuple(self.draw(st.integers(1, 4)) if s == 1 else s for s in old)
        if math.prod(new) > MAX_NUMEL or new == m.shape:
            return None
        return self.add("expand", (x,), new, Meta(new, m.kind, m.bound, m.exact))

    def op_pad(self, x):
        m = self.p.meta[x]
        if not m.shape:
            return None
        pads = []
        for s in m.shape:
            b, a = self.draw(st.integers(-1, 2)), self.draw(st.integers(-1, 2))
            if s + min(b, 0) + min(a, 0) < 1:
                b, a = max(b, 0), max(a, 0)
            pads.append((b, a))
        pads = tuple(pads)
        if all(p == (0, 0) for p in pads):
            return None
        new = tuple(s + b + a for s, (b, a) in zip(m.shape, pads))
        if math.prod(new) > MAX_NUMEL:
            return None
        value = self.draw(st.sampled_from([0, 1, -2] if m.kind != "b" else [0, 1]))
        value = bool(value) if m.kind == "b" else value
        return self.add("pad", (x,), (pads, value), Meta(new, m.kind, max(m.bound, abs(value)), m.exact))

    def op_shrink(self, x):
        m = self.p.meta[x]
        if not m.shape:
            return None
        bounds = []
        for s in m.shape:
            b = self.draw(st.integers(0, s - 1))
            bounds.append((b, self.draw(st.integers(b + 1, s))))
        bounds = tuple(bounds)
        if all(b == (0, s) for b, s in zip(bounds, m.shape)):
            return None
        return self.add("shrink", (x,), bounds, Meta(tuple(e - b for b, e in bounds), m.kind, m.bound, m.exact))

    def op_flip(self, x):
        m = self.p.meta[x]
        if not m.shape:
            return None
        axes = tuple(sorted(self.draw(st.sets(st.integers(0, len(m.shape) - 1), min_size=1))))
        return self.add("flip", (x,), axes, m)

    def _binary(self, op: str, x, exact_only: bool = False):
        m = self.p.meta[x]
        if m.kind == "b" or (exact_only and not m.exact):
            return None
        y = self.operand(m.shape, "fi", exact_only, same=x)
        if y is None:
            return None
        my = self.meta(y)
        shape = _broadcast(m.shape, my.shape)
        bound = {"add": m.bound + my.bound, "sub": m.bound + my.bound, "mul": m.bound * my.bound,
                 "maximum": max(m.bound, my.bound), "cmp": 1}[op]
        if bound > BOUND_LIMIT:
            return None
        kind = "b" if op == "cmp" else "f" if "f" in (m.kind, my.kind) else "i"
        arg = self.draw(st.sampled_from(list(_CMP))) if op == "cmp" else None
        swap = op != "cmp" and (isinstance(y, int) or op != "maximum") and self.draw(st.booleans())
        srcs = (y, x) if swap else (x, y)
        return self.add(op, srcs, arg, Meta(shape, kind, bound, m.exact and my.exact))

    def op_add(self, x):
        return self._binary("add", x)

    def op_sub(self, x):
        return self._binary("sub", x)

    def op_mul(self, x):
        return self._binary("mul", x)

    def op_maximum(self, x):
        return self._binary("maximum", x)

    def op_cmp(self, x):
        return self._binary("cmp", x, exact_only=True)

    def op_where(self, x):
        m = self.p.meta[x]
        if m.kind == "b":  # x is the condition
            a = self.operand(m.shape, "fi", exact_only=False)
            b = self.operand(m.shape, "fi", exact_only=False, same=a if isinstance(a, int) else None) \
                if a is not None else None
            if b is None:
                return None
            c = x
        else:
            conds = [i for i, mc in self.p.meta.items()
                     if mc.kind == "b" and _broadcast(mc.shape, m.shape) is not None]
            c = None
            if conds and self.draw(st.booleans()):
                c = self.pick(conds)
            elif m.exact:
                c = self.op_cmp(x)
            if c is None:
                return None
            a = x
            b = self.operand(m.shape, "fi", exact_only=False, same=x)
        ma, mb, mc = self.meta(a), self.meta(b), self.p.meta[c]
        shape = _broadcast(_broadcast(mc.shape, ma.shape), mb.shape)
        if shape is None or math.prod(shape) > MAX_NUMEL:
            return None
        if isinstance(a, K) and isinstance(b, K):
            kind = "i"  # two Python ints: int32
        else:
            kind = "f" if "f" in (ma.kind, mb.kind) else "i"
        return self.add("where", (c, a, b), None, Meta(shape, kind, max(ma.bound, mb.bound), ma.exact and mb.exact))

    def op_exp(self, x):
        m = self.p.meta[x]
        if m.kind == "b":
            return None
        if m.bound > 3:
            x = self.add("clip", (x,), 3, Meta(m.shape, m.kind, 3, m.exact))
        return self.add("exp", (x,), None, Meta(m.shape, "f", math.exp(min(m.bound, 3)), False))

    def op_float(self, x):
        m = self.p.meta[x]
        if m.kind != "b":
            return None
        return self.add("float", (x,), None, Meta(m.shape, "f", 1, True))

    def op_int(self, x):
        m = self.p.meta[x]
        if not m.exact or m.kind == "i":  # exact values are integers: the cast to int32 loses nothing
            return None
        return self.add("int", (x,), None, Meta(m.shape, "i", m.bound, True))

    def op_iota(self, x):
        """x + an arange along the last axis (no device: computed inside the kernel)."""
        m = self.p.meta[x]
        start = self.draw(st.integers(-4, 4))
        if m.kind == "b" or not m.shape or m.bound + abs(start) + m.shape[-1] > BOUND_LIMIT:
            return None
        return self.add("iota", (x,), (start, None), Meta(m.shape, m.kind, m.bound + abs(start) + m.shape[-1], m.exact))

    def _reduce(self, op: str, x):
        m = self.p.meta[x]
        nd = len(m.shape)
        axes = self.draw(st.none() | st.sets(st.integers(0, nd - 1), min_size=1).map(lambda s: tuple(sorted(s)))) \
            if nd else None
        keep = self.draw(st.booleans())
        red = range(nd) if axes is None else axes
        count = math.prod(m.shape[i] for i in red)
        shape = tuple(1 if i in red else s for i, s in enumerate(m.shape)) if keep else \
            tuple(s for i, s in enumerate(m.shape) if i not in red)
        bound = m.bound * count if op == "sum" else m.bound
        if bound > BOUND_LIMIT:
            return None
        kind = "i" if op == "sum" and m.kind == "b" else m.kind
        return self.add(op, (x,), (axes, keep), Meta(shape, kind, bound, m.exact))

    def op_sum(self, x):
        return self._reduce("sum", x)

    def op_max(self, x):
        return self._reduce("max", x)

    def op_contiguous(self, x):
        return self.add("contiguous", (x,), None, self.p.meta[x])

    # -- realize points

    def realize(self, ids: list[int], max_outputs: int, copy: bool = False, min_outputs: int = 1) -> list[int]:
        n = self.draw(st.integers(min_outputs, max_outputs))
        # the last value, and others: often values it was computed from (an output that another output reads),
        # or a view of one (an output that is a view of a buffer another output reads)
        cone = [i for i in ids if i in self.ancestors(ids[-1]) and self.p.instrs_by_out[i].op != "input"]
        outs = [ids[-1]]
        for _ in range(n - 1):
            how = self.draw(st.sampled_from(["any", "cone", "view of cone"] if cone else ["any"]))
            x = self.pick(cone if how != "any" else ids)
            for _ in range(4 if how == "view of cone" else 0):
                if (v := getattr(self, "op_" + self.draw(st.sampled_from(MOVEMENT)))(x)) is not None:
                    x = v
                    break
            outs.append(x)
        if copy:  # a view of a buffer is read on the host: contiguous makes it a kernel
            outs = [self.add("contiguous", (x,), None, self.p.meta[x]) for x in outs]
        self.p.instrs.append(Ins("realize", None, tuple(outs)))
        return outs


SHAPES = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple).filter(lambda s: math.prod(s) <= MAX_NUMEL)


@st.composite
def programs(draw, ops: tuple[str, ...], contiguous: bool = False, n_inputs=(1, 2), steps=(1, 8),
             phases=(1, 1), max_outputs: int = 1, copy: bool = False, first: tuple[str, ...] | None = None,
             min_outputs: int = 1) -> Program:
    """A program; `first`: the ops the first step draws from (the rest draw from `ops`)."""
    b = Builder(draw, ops, contiguous)
    n_phases = draw(st.integers(*phases))
    for _ in range(draw(st.integers(*n_inputs))):
        b.input(draw(SHAPES))
    for phase in range(n_phases):
        for i in range(draw(st.integers(*steps))):
            b.step(list(b.p.meta), first if phase == 0 and i == 0 else None)
        b.realize(list(b.p.meta), max_outputs, copy, min_outputs)
    return b.p


# ----------------------------------------------------------------------------- running and checking


def assert_value(got: np.ndarray, want: np.ndarray, m: Meta, what: str) -> None:
    assert got.shape == tuple(m.shape) == want.shape, f"{what}: shape {got.shape}, numpy {want.shape}"
    if m.exact:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4,
                                   atol=1e-4 * max(1.0, m.bound), err_msg=what)


def check_schedule(outs: list[Tensor], live: list[Tensor]) -> int:
    """The invariants of `Tensor.schedule(*outs)`; returns the number of kernels."""
    # no kernel may write into a buffer that some tensor already reads (there are no assigns here)
    input_bufs = {u for t in live for u in t.uop.toposort() if u.op is Ops.BUFFER}
    items = Tensor.schedule(*outs)
    for it in items:
        assert it.ast.op is Ops.SINK and it.ast.src, f"kernel AST is {it.ast.op}, not a SINK of STOREs"
        assert all(s.op is Ops.STORE for s in it.ast.src), \
            f"kernel SINK has sources {[s.op.name for s in it.ast.src]}, not only STOREs"
        for o in it.outputs:
            assert it.buffers[o] not in input_bufs, "a kernel stores into a buffer that a tensor already reads"
    graph = {u.op for t in outs for u in t.uop.toposort()}
    if Ops.REDUCE_AXIS not in graph and Ops.CONTIGUOUS not in graph:
        computing = {t.uop for t in outs if any(u.op not in VIEW_OPS for u in t.uop.toposort())}
        assert len(items) <= len(computing), \
            f"{len(items)} kernels for {len(computing)} computed outputs without reductions or contiguous"
    return len(items)


def run(prog: Program) -> None:
    """Replay the program on Tensors and on numpy; check every realize point."""
    note(prog.code())
    for op in sorted({i.op for i in prog.instrs} - {"input", "realize"}):
        event(f"op {op}")
    event(f"realize points: {sum(i.op == 'realize' for i in prog.instrs)}")
    tens: dict[int, Tensor] = {}
    arrs: dict[int, np.ndarray] = {}
    inputs: dict[int, np.ndarray] = {}

    def get(env, s):
        return s.v if isinstance(s, K) else env[s]

    for ins in prog.instrs:
        if ins.op == "input":
            arrs[ins.out] = inputs[ins.out] = inp(*ins.arg)
            tens[ins.out] = T(arrs[ins.out])
        elif ins.op == "realize":
            outs = [tens[s] for s in ins.srcs]
            metas = [prog.meta[s] for s in ins.srcs]
            wants = [arrs[s] for s in ins.srcs]
            lazies = [t.lazy_numpy() for t in outs]
            for s, lz, w, m in zip(ins.srcs, lazies, wants, metas):
                assert_value(lz, w, m, f"lazy_numpy of v{s} against numpy")
            n_kernels = check_schedule(outs, list(tens.values()))
            event(f"kernels per realize: {min(n_kernels, 4)}{'+' if n_kernels >= 4 else ''}")
            Tensor.realize(*outs)
            for s, t, w, lz, m in zip(ins.srcs, outs, wants, lazies, metas):
                got = t.numpy()
                assert_value(got, w, m, f"realized v{s} against numpy")
                assert_value(got, lz, m, f"realized v{s} against its lazy_numpy")
        else:
            tfn, nfn, _ = OPS[ins.op]
            tens[ins.out] = tfn(ins.arg, *(get(tens, s) for s in ins.srcs))
            with np.errstate(all="raise"):
                arrs[ins.out] = np.asarray(nfn(ins.arg, *(get(arrs, s) for s in ins.srcs)))
    for i, a in inputs.items():  # kernels never write into their inputs
        np.testing.assert_array_equal(tens[i].numpy(), a, err_msg=f"input v{i} changed")


# ----------------------------------------------------------------------------- properties


@settings(max_examples=examples(200), **SETTINGS)
@given(programs(MOVEMENT, n_inputs=(1, 1), steps=(1, 6), copy=True))
def test_movement_chains(prog):
    """1. A chain of movement ops on one realized input, copied by a kernel (`.contiguous()`), equals the
    same chain in numpy."""
    run(prog)


@settings(max_examples=examples(250), **SETTINGS)
@given(programs(MOVEMENT + ELEMENTWISE + REDUCE, contiguous=True, steps=(3, 10)))
def test_mixed_programs(prog):
    """2. Movement, elementwise ops, reductions and contiguous at random points."""
    run(prog)


@settings(max_examples=examples(200), **SETTINGS)
@given(programs(MOVEMENT + ELEMENTWISE + REDUCE, contiguous=True, steps=(2, 8), phases=(1, 3), max_outputs=3))
def test_several_outputs_and_phases(prog):
    """3. Several outputs realized together; later programs reuse tensors of earlier ones."""
    run(prog)


@settings(max_examples=examples(150), **SETTINGS)
@given(programs(MOVEMENT + ELEMENTWISE + ("contiguous",), n_inputs=(1, 1), steps=(1, 4), min_outputs=2, max_outputs=3,
                first=REDUCE))
def test_shared_reduce_read_by_several_outputs(prog):
    """3b. A reduction shared by several outputs, some of them views: the children gate of rangeify must see
    exactly the consumers that index the shared node."""
    run(prog)


@settings(max_examples=examples(200), **SETTINGS)
@given(programs(MOVEMENT + ELEMENTWISE, steps=(2, 10), phases=(1, 2), max_outputs=3))
def test_fusion_one_kernel_per_output(prog):
    """Without reductions and contiguous, every output is one fused kernel (checked in check_schedule)."""
    run(prog)


# views of a square target that keep its shape: each reads the target at other indices
SQUARE_VIEWS = {
    "T": (lambda t: t.permute(1, 0), lambda a: a.T),
    "flip0": (lambda t: t.flip(0), lambda a: a[::-1]),
    "flip1": (lambda t: t.flip(1), lambda a: a[:, ::-1]),
    "shift": (lambda t: t.shrink(((1, t.shape[0]), None)).pad(((0, 1), (0, 0))),
              lambda a: np.pad(a[1:], ((0, 1), (0, 0)))),
    "row0": (lambda t: t.shrink(((0, 1), None)).expand(t.shape), lambda a: np.broadcast_to(a[0:1], a.shape)),
    "flat": (lambda t: t.reshape(-1).reshape(t.shape), lambda a: a),
}
COMBINE = {
    "alone": (lambda t, v: v, lambda a, v: v),
    "add": (lambda t, v: t + v, lambda a, v: a + v),
    "max": (lambda t, v: t.maximum(v), lambda a, v: np.maximum(a, v)),
    "minus row sums": (lambda t, v: v - t.sum(1, keepdim=True), lambda a, v: v - a.sum(1, keepdims=True)),
}


@settings(max_examples=examples(40), **SETTINGS)
@given(st.integers(1, 5), st.lists(st.tuples(st.lists(st.sampled_from(sorted(SQUARE_VIEWS)), max_size=3),
                                             st.sampled_from(sorted(COMBINE))), min_size=1, max_size=3))
def test_assign_reading_its_target_through_views(n, assigns):
    """4. `w.assign(f(w))` where f reads w through movement ops (or a reduce) and combines it with w at the
    store's own index, a few times in a row: equal to numpy, at most a copy and the assign per realize
    (the kernel-AST checker in create_schedule rejects a kernel that reads w where it does not store),
    and a view of w taken before sees every new value."""
    a = inp((n, n))
    w = T(a)
    flat = w.reshape(n * n)
    for views, how in assigns:
        note(f"w.assign({how}(w, {' . '.join(views) or 'w'}))")
        v, nv = w, a
        for name in views:
            v, nv = SQUARE_VIEWS[name][0](v), SQUARE_VIEWS[name][1](nv)
        w.assign(COMBINE[how][0](w, v))
        a = np.asarray(COMBINE[how][1](a, nv), np.float32)
        kernels = len(w.schedule())
        assert kernels <= 2, f"{kernels} kernels; the value into a fresh buffer, then the assign, is 2"
        w.realize()
        np.testing.assert_array_equal(w.numpy(), a)
        np.testing.assert_array_equal(flat.numpy(), a.reshape(-1))


# ----------------------------------------------------------------------------- regressions
# Minimized failures the properties found (all fixed in the scheduler since; each docstring says what was wrong).


def check(*outs: Tensor) -> None:
    """Realize `outs` together; each must equal its lazy_numpy() computed before realization."""
    wants = [o.lazy_numpy() for o in outs]
    Tensor.realize(*outs)
    for i, (o, w) in enumerate(zip(outs, wants)):
        got = o.numpy()
        assert got.shape == w.shape, f"output {i}: shape {got.shape}, expected {w.shape}"
        np.testing.assert_array_equal(got, w, err_msg=f"output {i}")


def F(a) -> Tensor:
    return T(np.array(a, np.float32))


def test_regression_pad_of_pad_in_a_kernel():
    """The inner pad's bounds test compared an index the outer pad had gated: CMPLT(WHERE(.., INVALID), 1)."""
    check(F([5.0]).pad(((0, 1),)).pad(((0, 1),)) + 1)


def test_regression_pad_shrink_pad_in_a_kernel():
    """As above, with the gate under the shrink's ADD when the inner pad compares."""
    check(F([[0.0]]).pad(((0, 1), (0, 0))).shrink(((1, 2), (0, 1))).pad(((0, 1), (0, 0))).contiguous())


def test_regression_view_output_of_a_shared_reduce():
    """A view output (SINK <- RESHAPE <- REALIZE) counted as a consumer at the CHILDREN gate, which rangeify never
    indexes: the gate waited forever (RewriteError)."""
    s = F([1.0, 2.0]).sum(keepdim=True)
    check(s.reshape(()), s.contiguous())


def test_regression_view_output_and_two_readers_of_a_shared_reduce():
    """As above, with two indexed readers besides the view output."""
    s = F([1.0, 2.0]).sum(keepdim=True)
    check(s.reshape(()), s.contiguous(), s * 2)


def test_regression_where_with_equal_branches_1d():
    """symbolic folds WHERE(c, x, x) to the input's INDEX; bufferize-of-own-index moved the output tag onto the input
    BUFFER, which collect_outputs ignored: the tensor was never realized."""
    x = F([-1.0, 2.0])
    check((x < 0).where(x, x))


def test_regression_output_read_back_through_pad_2d():
    """inline-cheap-buffer substituted a pad-gated index WHERE(v, r, INVALID) for a range after the symbolic stage:
    ADD(WHERE(.., INVALID), ..) was never lifted to the top of the index."""
    v = F([[1.0, 2.0], [3.0, 4.0]]) + 1
    check(v, v.pad(((0, 0), (0, 1))) + 1)


def test_regression_padded_output_read_back_through_pad():
    """As above, the gated index reaching the inlined computation's own pad test: CMPLT(WHERE(.., INVALID), 2)."""
    v = F([1.0, 2.0]).pad(((0, 1),)) + 1
    check(v, v.pad(((0, 1),)) + 1)


def test_regression_0d_reduce_read_directly_and_through_contiguous():
    """A 0-d graph has no RANGE leaves: the first rangeify pass finished no node while both CHILDREN consumers
    deferred, and the rewrite engine gave up (finished == 0) before the retry that would have succeeded."""
    s = F([1.0, 2.0]).sum()
    check(s.contiguous() + s)


def test_regression_flipped_padded_output_read_back_through_pad():
    """inline-cheap-buffer again: the flip of a size-1 axis leaves NEG(r); a pad-gated r gave NEG(WHERE(.., INVALID)),
    which no lift-invalid rule handled."""
    v = F([[1.0, 2.0]]).flip(0).pad(((0, 1), (0, 0)), value=1)
    check(v.pad(((0, 1), (0, 0)), value=1), v)


def test_regression_view_chain_output_of_a_shared_reduce():
    """The children gate counted a view output two movement ops above a REALIZE (SINK <- FLIP <- EXPAND <- REALIZE)
    as a consumer of the EXPAND; rangeify never indexes it, so the gate waited forever."""
    v = F([1.0, 2.0]).sum(keepdim=True).expand(2)
    check(v + 1, v.flip(0))


def test_regression_output_equal_to_part_of_a_buffer():
    """where(x < x, x, x) of a shrink folds to the load x[r0]; bufferize-of-own-index then returned the whole
    buffer (2 elements) for a 1-element output. Now it is a view of the part the ranges read."""
    v = F([-1.0, 0.0]).shrink(((0, 1),))
    w = (v < v).where(v, v)
    assert Tensor.schedule(w.reshape(())) == []  # a view of the input
    check(w.reshape(()))
    check(F([[1.0, 2.0], [3.0, 4.0]]).shrink(((0, 1), (0, 1))) * 1)


def test_regression_arange_in_a_buffer_inlined_under_a_pad():
    """A cheap buffer holding an arange (an index used as a value) was inlined where a pad reads it with a gated
    index: CAST(WHERE(valid, i, INVALID)) reached the kernel. An invalid lane now reads 0, as a load would."""
    v = F([1.0, 2.0, 3.0, 4.0]) + Tensor.arange(4)
    check(v, v.pad(((0, 1),), value=1))


def test_regression_output_entirely_in_padding():
    """A shrink that keeps only the padding of a stored tensor: inlining the cheap buffer put a range of size 1
    into the pad's gates after the symbolic stage, so `0 < r0` stayed undecided while its gated load had
    already folded to a bare INVALID. Symbolic now runs again after the cleanups."""
    v = F([-1.0, 0.0]).flip(0).contiguous().pad(((1, 0),), value=1).shrink(((0, 1),))
    check(v.contiguous().reshape(()).contiguous(), v)
