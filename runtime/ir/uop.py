"""The UOp: an immutable, hash-consed node of the IR.

Structurally equal nodes are the same Python object, so `a is b` (and `a == b`)
is structural equality and a node's hash is its identity. Derived facts
(parents, open ranges, shape, value bounds) are computed once per node and cached.
"""
from __future__ import annotations

import weakref
from math import copysign
from typing import Any, Callable, Generator, Iterator

from rulec.runtime.ir.dtype import DType, PtrDType, dtypes, python_value
from rulec.runtime.ir.ops import GroupOp, OpAttrs as Ops  # plain class attributes: a fast Ops.X
from rulec.runtime.ir.walk import run_recursive

_UNSET: Any = object()
# the marker of a node whose sources are done, on the flat stacks of the walks below
_EMIT: Any = object()

# the key's type slot of a CONST -0.0 (its own node: see UOp.__new__)
_NEG_ZERO = "-0.0"

# Ops whose result is a bool whatever the operand dtype.
_COMPARISONS = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})


class _KeyedRef(weakref.ref):
    """A weak reference that knows its key in the hash-consing table. weakref.KeyedRef does the same with a
    Python-level __new__ and __init__; this one is built in C and given its key after."""

    __slots__ = ("key",)


class UOp:
    __slots__ = ("op", "dtype", "src", "arg", "tag", "__weakref__", "_parents", "_shape", "_bounds", "_key",
                 "_mask", "_ranges")
    # hash-consing table: key -> weak reference to the node (a plain dict of _KeyedRefs: WeakValueDictionary
    # does the same with a Python-level call per lookup and per insert, on every node built)
    _cache: dict[tuple, _KeyedRef] = {}

    op: Ops
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any
    tag: Any

    def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None, tag: Any = None):
        # the type of arg is part of the key: 1, 1.0 and True are equal in Python but not as args; so is the
        # sign of a float zero: 0.0 == -0.0, but x / 0.0 and x / -0.0 are infinities of opposite signs
        key = (op, dtype, src, arg, _NEG_ZERO if type(arg) is float and arg == 0.0 and copysign(1.0, arg) < 0
               else type(arg), tag)
        try:
            ref = _CACHE.get(key)
        except TypeError:
            raise TypeError(f"UOp arg must be hashable, got {type(arg).__name__}: {arg!r}") from None
        if ref is not None:
            hit = ref()
            if hit is not None:
                return hit
        self = object.__new__(cls)
        # the slots' own setters: object.__setattr__ looks each name up first, twice the cost (every node built)
        _set_op(self, op)
        _set_dtype(self, dtype)
        _set_src(self, src)
        _set_arg(self, arg)
        _set_tag(self, tag)
        # which ops occur at or below this node, one bit per op: O(sources) here, so "does this subgraph hold
        # a REDUCE_AXIS?" never walks the subgraph (a walk per node is quadratic on deep graphs)
        mask = 1 << op
        for s_ in src:
            mask |= s_._mask
        _set_mask(self, mask)
        _set_ranges(self, None)
        _set_parents(self, None)
        _set_shape(self, _UNSET)
        _set_bounds(self, None)
        _set_key(self, key)
        ref = _KeyedRef(self, _forget)
        ref.key = key
        _CACHE[key] = ref
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("UOp is immutable; use .replace()")

    def __reduce__(self):
        # the whole graph as one flat table, sources first: pickling node by node would recurse per level
        order = list(self.toposort())
        index = {u: i for i, u in enumerate(order)}
        return _from_table, (tuple((u.op, u.dtype, tuple(index[s] for s in u.src), u.arg, u.tag) for u in order),)

    # ---------------------------------------------------------------- graph

    def replace(self, **kw: Any) -> UOp:
        """This node with some of op, dtype, src, arg, tag changed."""
        op = kw.pop("op", self.op)
        dtype = kw.pop("dtype", self.dtype)
        src = tuple(kw.pop("src", self.src))
        arg = kw.pop("arg", self.arg)
        tag = kw.pop("tag", self.tag)
        if kw:
            raise TypeError(f"replace() got unexpected fields {sorted(kw)}")
        return UOp(op, dtype, src, arg, tag)

    def rtag(self, tag: Any = None) -> UOp:
        return self.replace(tag=tag)

    def toposort(self, gate: Callable[[UOp], bool] | None = None) -> dict[UOp, None]:
        """Every node reachable from this one, sources before users (as dict keys, ordered).

        With `gate`, the walk does not descend below nodes for which gate(node) is False
        (they are still included).
        """
        if gate is None:
            # a copy of the cached parents, plus this node: caching a dict that held the node itself would
            # be a reference cycle, keeping every graph whose toposort was taken alive until the garbage
            # collector finds it
            topo = self.parents.copy()
            topo[self] = None
            return topo
        return self._walk(gate)

    def _walk(self, gate: Callable[[UOp], bool] | None) -> dict[UOp, None]:
        # one flat stack, no tuple per entry (two per node were most of the walk's allocations): a node alone
        # is "visit it", a node followed by _EMIT is "its sources are done, emit it"
        out: dict[UOp, None] = {}
        stack: list[Any] = [self]
        push, pop = stack.append, stack.pop
        while stack:
            node = pop()
            if node is _EMIT:
                out[pop()] = None
                continue
            if node in out:
                continue
            push(node)
            push(_EMIT)
            if gate is None or gate(node):
                for s in reversed(node.src):
                    if s not in out:
                        push(s)
        return out

    @property
    def parents(self) -> dict[UOp, None]:
        """Every node strictly below this one (its transitive sources), in toposort order; cached per node
        (do not modify it)."""
        if self._parents is None:
            topo = self._walk(None)
            del topo[self]
            object.__setattr__(self, "_parents", topo)
        return self._parents

    def reaches(self, x: UOp) -> bool:
        """Whether `x` is this node or one below it (a lookup in the cached parents, no copy of them)."""
        return x is self or x in self.parents

    @property
    def sparents(self) -> dict[UOp, None]:
        """Every node reachable from this one, itself included."""
        return self.toposort()

    def get_children_map(self) -> dict[UOp, dict[UOp, None]]:
        children: dict[UOp, dict[UOp, None]] = {}
        for u in self.toposort():  # sources first: each source has its entry before any user is seen
            children[u] = {}
            for s in u.src:
                children[s][u] = None
        return children

    def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
        return substitute(self, mapping)

    @property
    def ranges(self) -> tuple[UOp, ...]:
        """RANGE nodes this node depends on and that are not closed below it (cached per node, from the
        sources' own: a walk per node would be quadratic over a chain of kernels)."""
        if self._ranges is None:
            _fill_cache(self, "_ranges", None, _sources_with_ranges, _ranges_of)
        return self._ranges

    def has_op(self, ops_mask: int) -> bool:
        """Whether any op of `ops_mask` (see `op_mask`) occurs at or below this node."""
        return bool(self._mask & ops_mask)

    # ---------------------------------------------------------------- facts

    @property
    def shape(self) -> tuple | None:
        if self._shape is _UNSET:
            from rulec.runtime.ir.shape import infer_shape, shape_sources

            _fill_cache(self, "_shape", _UNSET, shape_sources, infer_shape)
        return self._shape

    @property
    def size(self) -> int:
        from rulec.runtime.ir.shape import prod

        shape = self.shape
        if shape is None:
            raise ValueError(f"{self.op.name} has no shape")
        return prod(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape or ())

    @property
    def vmin(self):
        return self._range_bounds()[0]

    @property
    def vmax(self):
        return self._range_bounds()[1]

    def _range_bounds(self) -> tuple:
        if self._bounds is None:
            from rulec.runtime.ir.bounds import bounds, bounds_sources

            _fill_cache(self, "_bounds", None, bounds_sources, bounds)
        return self._bounds

    @property
    def ptrdtype(self) -> PtrDType:
        if not isinstance(self.dtype, PtrDType):
            raise TypeError(f"{self.op.name} has dtype {self.dtype}, not a pointer")
        return self.dtype

    @property
    def base(self) -> UOp:
        """The node below any chain of movement ops."""
        node = self
        while node.op in GroupOp.Movement:
            node = node.src[0]
        return node

    @property
    def is_realized(self) -> bool:
        """Whether this is a buffer (seen through movement ops): a tensor's value that needs no kernel."""
        return self.base.op is Ops.BUFFER

    # ---------------------------------------------------------------- builders

    @staticmethod
    def const(dtype: DType, value: Any, src: tuple[UOp, ...] = ()) -> UOp:
        return UOp(Ops.CONST, dtype, src, python_value(dtype, value))

    def const_like(self, value: Any) -> UOp:
        return UOp.const(self.dtype.scalar, value)

    @staticmethod
    def variable(name: str, vmin: int, vmax: int, dtype: DType = dtypes.index) -> UOp:
        return UOp(Ops.DEFINE_VAR, dtype, (), (name, vmin, vmax))

    def bind(self, value: int) -> UOp:
        """A DEFINE_VAR bound to a value for one run: symbolic shapes use it as a dimension."""
        if self.op is not Ops.DEFINE_VAR:
            raise TypeError(f"only a DEFINE_VAR can be bound, not {self.op.name}")
        if not self.arg[1] <= value <= self.arg[2]:
            raise ValueError(f"{self.arg[0]}={value} is outside its range [{self.arg[1]}, {self.arg[2]}]")
        return UOp(Ops.BIND, self.dtype, (self, UOp.const(self.dtype, value)))

    @staticmethod
    def range(size: int | UOp, idx: int, kind: str = "loop") -> UOp:
        end = size if isinstance(size, UOp) else UOp.const(dtypes.index, size)
        return UOp(Ops.RANGE, dtypes.index, (end,), (idx, kind))

    @staticmethod
    def sink(*srcs: UOp) -> UOp:
        return UOp(Ops.SINK, dtypes.void, tuple(srcs))

    def alu(self, op: Ops, *others: Any) -> UOp:
        srcs = (self,) + tuple(o if isinstance(o, UOp) else self.const_like(o) for o in others)
        if op is Ops.WHERE:
            out = srcs[1].dtype
        elif op in _COMPARISONS:
            out = dtypes.bool
        else:
            out = self.dtype
        return UOp(op, out, srcs)

    def where(self, a: Any, b: Any) -> UOp:
        a_ = a if isinstance(a, UOp) else (b.const_like(a) if isinstance(b, UOp) else UOp.const(dtypes.index, a))
        b_ = b if isinstance(b, UOp) else a_.const_like(b)
        return UOp(Ops.WHERE, a_.dtype, (self, a_, b_))

    def cast(self, dtype: DType) -> UOp:
        return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))

    def eq(self, other: Any) -> UOp:
        return self.alu(Ops.CMPEQ, other)

    def ne(self, other: Any) -> UOp:
        return self.alu(Ops.CMPNE, other)

    def maximum(self, other: Any) -> UOp:
        return self.alu(Ops.MAX, other)

    def minimum(self, other: Any) -> UOp:
        return -((-self).maximum(-other if isinstance(other, UOp) else -other))

    def index(self, *idx: UOp, dtype: DType | None = None, arg: Any = None) -> UOp:
        return UOp(Ops.INDEX, dtype or self.dtype, (self,) + idx, arg)

    def _rconst(self, other: Any) -> UOp:
        return other if isinstance(other, UOp) else self.const_like(other)

    def __add__(self, o: Any) -> UOp: return self.alu(Ops.ADD, o)
    def __radd__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.ADD, self)
    def __sub__(self, o: Any) -> UOp: return self.alu(Ops.SUB, o)
    def __rsub__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.SUB, self)
    def __mul__(self, o: Any) -> UOp: return self.alu(Ops.MUL, o)
    def __rmul__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.MUL, self)
    def __floordiv__(self, o: Any) -> UOp: return self.alu(Ops.IDIV, o)
    def __rfloordiv__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.IDIV, self)
    def __truediv__(self, o: Any) -> UOp: return self.alu(Ops.FDIV, o)
    def __rtruediv__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.FDIV, self)
    def __mod__(self, o: Any) -> UOp: return self.alu(Ops.MOD, o)
    def __rmod__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.MOD, self)
    def __neg__(self) -> UOp: return UOp(Ops.NEG, self.dtype, (self,))
    def __lt__(self, o: Any) -> UOp: return self.alu(Ops.CMPLT, o)
    def __gt__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.CMPLT, self)
    def __ge__(self, o: Any) -> UOp: return (self < o).ne(True)
    def __le__(self, o: Any) -> UOp: return (self > o).ne(True)
    def __and__(self, o: Any) -> UOp: return self.alu(Ops.AND, o)
    def __rand__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.AND, self)
    def __or__(self, o: Any) -> UOp: return self.alu(Ops.OR, o)
    def __ror__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.OR, self)
    def __xor__(self, o: Any) -> UOp: return self.alu(Ops.XOR, o)
    def __rxor__(self, o: Any) -> UOp: return self._rconst(o).alu(Ops.XOR, self)
    def __lshift__(self, o: Any) -> UOp: return self.alu(Ops.SHL, o)
    def __rshift__(self, o: Any) -> UOp: return self.alu(Ops.SHR, o)

    def __bool__(self) -> bool:
        # `a < b` builds a node. A comparison whose bounds decide it (`start_pos > 0` for a variable bound
        # to 1..8, as tinygrad's kv-cache code writes) is that bool; anything else has no truth value
        if self.dtype is dtypes.bool and (b := self._range_bounds())[0] == b[1] and isinstance(b[0], bool):
            return b[0]
        raise TypeError(f"a UOp has no truth value (here {self.op.name}, not decided by its bounds); "
                        f"compare with `is`, or evaluate it")

    # ---------------------------------------------------------------- printing

    def __repr__(self) -> str:
        return pretty(self)

    def __iter__(self) -> Iterator[UOp]:
        raise TypeError("UOp is not iterable; use .src")


_CACHE = UOp._cache
_set_op, _set_dtype, _set_src, _set_arg, _set_tag, _set_mask, _set_ranges, _set_parents, _set_shape, _set_bounds, \
    _set_key = (UOp.__dict__[name].__set__ for name in ("op", "dtype", "src", "arg", "tag", "_mask", "_ranges",
                                                         "_parents", "_shape", "_bounds", "_key"))


def _forget(ref: _KeyedRef) -> None:
    """A node died: drop its table entry, unless an equal node was built again since."""
    if _CACHE.get(ref.key) is ref:
        del _CACHE[ref.key]


def op_mask(*ops: Ops) -> int:
    """The bit set of `ops`, to test a subgraph with `UOp.has_op`."""
    m = 0
    for op in ops:
        m |= 1 << op
    return m


_RANGE_BIT = 1 << Ops.RANGE


def _sources_with_ranges(u: UOp) -> tuple[UOp, ...]:
    return tuple(s for s in u.src if s._mask & _RANGE_BIT)


# ops that close ranges below them or open one (runtime/ir/shape.py: closed_ranges)
_CLOSE_OR_OPEN = frozenset({Ops.REDUCE, Ops.BUFFERIZE, Ops.END, Ops.STORE, Ops.RANGE})


def _ranges_of(n: UOp) -> tuple[UOp, ...]:
    """`n`'s open ranges: its sources' own tuple when they all agree and `n` closes none, as they do on
    nearly every node inside a kernel. A new tuple per node would be one more object per node for the
    garbage collector to track and promote, kept as long as the node."""
    if not n._mask & _RANGE_BIT:
        return ()
    if n.op not in _CLOSE_OR_OPEN:
        first = None
        for s in n.src:
            if s._mask & _RANGE_BIT:
                r = s._ranges
                if first is None:
                    first = r
                elif r is not first and r != first:
                    break
        else:
            if first is not None:
                return first
    from rulec.runtime.ir.shape import open_ranges_of

    return open_ranges_of(n)


def _from_table(table: tuple) -> UOp:
    """The last node of a table written by UOp.__reduce__ (each row's sources are earlier rows)."""
    nodes: list[UOp] = []
    for op, dtype, src, arg, tag in table:
        nodes.append(UOp(op, dtype, tuple(nodes[i] for i in src), arg, tag))
    return nodes[-1]


def _fill_cache(root: UOp, slot: str, unset: Any, needs: Callable[[UOp], tuple[UOp, ...]],
                compute: Callable[[UOp], Any]) -> None:
    """Compute a cached per-node fact of `root` and of every node it needs that lacks it, sources first.

    `needs(u)` names the sources whose fact `compute(u)` reads, so that `compute` only ever reads
    cached values: an explicit stack instead of recursion, for graphs of any depth.
    """
    # a flat stack as in UOp._walk: a node alone is "visit it", a node followed by _EMIT is "compute it"
    stack: list[Any] = [root]
    push, pop = stack.append, stack.pop
    while stack:
        node = pop()
        if node is _EMIT:
            node = pop()
            if getattr(node, slot) is unset:
                object.__setattr__(node, slot, compute(node))
            continue
        if getattr(node, slot) is not unset:
            continue
        push(node)
        push(_EMIT)
        for s in needs(node):
            if getattr(s, slot) is unset:
                push(s)


def pretty(root: UOp, max_nodes: int = 200) -> str:
    """A compact, readable dump; nodes used more than once are named and shown once."""
    counts: dict[UOp, int] = {}
    for u in root.toposort():
        for s in u.src:
            counts[s] = counts.get(s, 0) + 1
    names: dict[UOp, str] = {}
    lines: list[str] = []

    def fmt(u: UOp) -> Generator[UOp, str, str]:
        if u in names:
            return names[u]
        if u.op is Ops.CONST and not u.src:
            return f"{u.arg!r}" if u.dtype in (dtypes.index, dtypes.bool) else f"{u.arg!r}:{u.dtype.name}"
        if u.op is Ops.DEFINE_VAR:
            return str(u.arg[0])
        if u.op is Ops.RANGE:
            return f"r{u.arg[0]}"
        parts = [u.op.name]
        for s in u.src:
            parts.append((yield s))
        if u.arg is not None:
            parts.append(f":arg {u.arg!r}")
        if u.dtype not in (dtypes.index, dtypes.void):
            parts.append(f":dtype {u.dtype!r}".replace("dtypes.", ""))
        if u.tag is not None:
            parts.append(f":tag {u.tag!r}")
        text = "(" + " ".join(parts) + ")"
        if counts.get(u, 0) > 1 and len(text) > 24 and len(names) < max_nodes:
            names[u] = f"%{len(names)}"
            lines.append(f"{names[u]} = {text}")
            return names[u]
        return text

    # a node's text never changes once made (a name is given on first use), so it is made once
    body = run_recursive(fmt, root)
    return "\n".join(lines + [body]) if lines else body

def untagged(root: UOp, memo: dict[UOp, UOp] | None = None) -> UOp:
    """`root` with no tag anywhere (a plain graph edit). Tags are one schedule's bookkeeping: equal kernels of
    two schedules are one node without them. `memo` holds nodes already done, shared across calls."""
    memo = {} if memo is None else memo
    for x in root.toposort(gate=lambda n: n not in memo):  # sources first; stops at nodes done before
        if x in memo:
            continue
        srcs = tuple(memo[s] for s in x.src)
        memo[x] = x if x.tag is None and srcs == x.src else x.replace(src=srcs, tag=None)
    return memo[root]


def substitute(root: UOp, mapping: dict[UOp, UOp], descend: Callable[[UOp], bool] | None = None) -> UOp:
    """Replace nodes by identity, rebuilding everything above them (no rules involved: a plain graph edit).

    `descend(u)` False promises that no key of `mapping` is below `u`: the walk skips its subgraph.
    """
    if not mapping:
        return root
    memo: dict[UOp, UOp] = {}
    gate = (lambda x: x not in mapping) if descend is None else (lambda x: x not in mapping and descend(x))
    for u in root.toposort(gate=gate):
        if u in mapping:
            memo[u] = mapping[u]
            continue
        new_src = tuple(memo.get(s, s) for s in u.src)
        memo[u] = u if all(a is b for a, b in zip(new_src, u.src)) else u.replace(src=new_src)
    return memo[root]
