"""Which lanes of a CPU kernel's tile are computed as one vector op (a backend with a `vectors` entry).

The upcast step (runtime/codegen/steps.py) unrolls a tile: each lane is a scalar copy of the kernel's
body with its own accumulator. The copies are one computation on the lanes' data, which one vector op does
(superword packing, after Larsen and Amarasinghe). gcc does not find it itself: it vectorizes loops, and a tile's lanes are not a
loop (docs/performance.md). A pack is a tuple of nodes, one per lane, with one op and dtype, in one loop.
Packs grow from their seeds, stores of consecutive elements (one vector store) or of elements at one stride
(a tile of output channels: each lane stored alone), through the stored values' sources:

- loads of consecutive elements are one vector load;
- one accumulator per lane is one vector register, when every load and store of each is packed in lane order;
- an ALU op the backend lists is one vector op; an operand is a pack, one value for every lane, or scalars
  put together. A comparison's lanes are a mask (all ones or all zeros per lane), which a select reads.

Each lane does the operations it did alone, in the same order: results are bitwise the scalar kernel's, but
for the payload of a nan made from two (IEEE leaves it open; a compiler may swap a commutative op's operands).
A pack is computed where its last lane was, and a scalar that reads a lane waits until then. A pack is
dropped, and its lanes stay scalar, where that wait would move an access of a register or of a buffer the
kernel both reads and writes, or a loop's end; an access of such a buffer is never packed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rulec.runtime.codegen.linearize import Step
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp

VALUE_KINDS = ("load", "op", "reg_load")


@dataclass(frozen=True)
class VectorSpec:
    widths: tuple[int, ...]  # lanes per vector, tried widest first
    dtypes: frozenset[str]
    ops: frozenset[Ops]

    @classmethod
    def from_yaml(cls, entry: dict) -> VectorSpec:
        return cls(tuple(sorted(entry["widths"], reverse=True)), frozenset(entry["dtypes"]),
                   frozenset(Ops[o] for o in entry["ops"]))


@dataclass(eq=False)
class Pack:
    kind: str  # load | store (consecutive) | scatter (strided: lane by lane) | op | reg | reg_load | reg_store
    lanes: tuple[UOp, ...]
    at: int  # the step that computes it: its last lane's
    operands: tuple[tuple[UOp, ...], ...] = ()  # op: each source's lanes; stores: the value's
    group: tuple[UOp, ...] | None = None  # the accumulators of a reg, reg_load or reg_store pack


@dataclass
class VectorPlan:
    packs: list[Pack] = field(default_factory=list)
    lane_of: dict[UOp, tuple[Pack, int]] = field(default_factory=dict)
    values: dict[tuple[UOp, ...], Pack] = field(default_factory=dict)  # a value pack by its lanes
    order: list[int | Pack] = field(default_factory=list)  # what is rendered: steps (by number) and packs


def _reg(x: UOp) -> UOp | None:
    """The accumulator a LOAD or STORE target names (through AFTERs), or None for memory."""
    while x.op is Ops.AFTER:
        x = x.src[0]
    return x if x.op is Ops.DEFINE_REG else None


def _buffer(index: UOp) -> UOp:
    """The buffer an INDEX addresses, through the AFTERs that order its accesses."""
    b = index.src[0]
    while b.op is Ops.AFTER:
        b = b.src[0]
    return b


def _linear(x: UOp, memo: dict) -> tuple[frozenset, int]:
    """An index as (terms with their factors, constant), through ADD, SUB and MUL by a constant; anything
    else is a term. Two indices whose terms agree differ by the difference of their constants: index
    arithmetic does not wrap (the kernel checker bounds every index, runtime/schedule/kernel_check.py)."""
    if x in memo:
        return memo[x]
    if x.op is Ops.CONST and isinstance(x.arg, int):
        out: tuple[frozenset, int] = (frozenset(), x.arg)
    elif x.op in (Ops.ADD, Ops.SUB):
        (ta, ca), (tb, cb) = _linear(x.src[0], memo), _linear(x.src[1], memo)
        sign = 1 if x.op is Ops.ADD else -1
        terms = dict(ta)
        for t, f in tb:
            terms[t] = terms.get(t, 0) + sign * f
        out = (frozenset((t, f) for t, f in terms.items() if f), ca + sign * cb)
    elif x.op is Ops.MUL and any(s.op is Ops.CONST and isinstance(s.arg, int) for s in x.src):
        k, other = (x.src[1], x.src[0]) if x.src[1].op is Ops.CONST else (x.src[0], x.src[1])
        t, c = _linear(other, memo)
        out = (frozenset((u, f * k.arg) for u, f in t if f * k.arg), c * k.arg)
    else:
        out = (frozenset({(x, 1)}), 0)
    memo[x] = out
    return out


def plan_vectors(steps: tuple[Step, ...], spec: VectorSpec) -> VectorPlan:
    """The packs of a linearized kernel (see the module docstring)."""
    return _Planner(steps, spec).run()


class _Planner:
    def __init__(self, steps: tuple[Step, ...], spec: VectorSpec):
        self.spec, self.steps = spec, steps
        self.pos: dict[UOp, int] = {}
        self.block: dict[UOp, UOp | None] = {}
        self.users: dict[UOp, list[UOp]] = {}
        self.reg_access: dict[UOp, list[UOp]] = {}
        loops: list[UOp | None] = [None]
        for i, s in enumerate(steps):
            if s.kind == "open":
                loops.append(s.uop)
            elif s.kind == "close":
                loops.pop()
            else:
                self.pos[s.uop], self.block[s.uop] = i, loops[-1]
        for u in self.pos:
            for src in u.src:
                self.users.setdefault(src, []).append(u)
            reg = _reg(u.src[0]) if u.op in (Ops.LOAD, Ops.STORE) and u.src else None
            if reg is not None:
                self.reg_access.setdefault(reg, []).append(u)
        # buffers both read and written: their accesses keep their order, so none is packed
        self.stores_of: dict[UOp, list[UOp]] = {}
        for u in self.pos:
            if u.op is Ops.STORE and u.src[0].op is Ops.INDEX:
                self.stores_of.setdefault(_buffer(u.src[0]), []).append(u)
        written = set(self.stores_of)
        self.shared = {_buffer(u.src[0]) for u in self.pos if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX} & written
        self.linear_memo: dict = {}
        self.plan = VectorPlan()
        self.groups: dict[tuple[UOp, ...], list[Pack]] = {}  # accumulators -> their packs
        self.tried_groups: set[tuple[UOp, ...]] = set()
        self.tried: set[tuple[UOp, ...]] = set()

    def run(self) -> VectorPlan:
        self.seed_stores()
        self.prune()
        while True:
            order, stuck, done = self.order(self.steps)
            if stuck is None and self.complete(order):
                self.plan.order = order
                return self.plan
            p = None if stuck is None else self.culprit(stuck, done)
            if p is None:  # not a pack's doing (never seen): every lane scalar, in the linearizer's order
                self.plan = VectorPlan(order=list(range(len(self.steps))))
                return self.plan
            self.drop(p)
            self.prune()

    # ---------------------------------------------------------------- building

    def add(self, kind: str, lanes: tuple[UOp, ...], operands=(), group=None) -> Pack:
        p = Pack(kind, lanes, max(self.pos[u] for u in lanes), tuple(operands), group)
        self.plan.packs.append(p)
        for k, u in enumerate(lanes):
            self.plan.lane_of[u] = (p, k)
        if kind in VALUE_KINDS:
            self.plan.values[lanes] = p
        return p

    def memory_lanes(self, lanes: tuple[UOp, ...], consecutive: bool = True) -> bool:
        """Ungated accesses, in one loop, of one buffer that the kernel does not both read and write, with no
        store that may write a lane's element between the lanes; of consecutive elements where asked."""
        idx = [u.src[0] for u in lanes]
        if any(i.op is not Ops.INDEX or len(i.src) != 2 for i in idx):
            return False
        buf = _buffer(idx[0])
        if buf.op is not Ops.DEFINE_GLOBAL or buf in self.shared or any(_buffer(i) is not buf for i in idx):
            return False
        if len({self.block[u] for u in lanes}) != 1 or lanes[0].op is Ops.STORE and self.stores_between(lanes):
            return False
        t0, c0 = _linear(idx[0].src[1], self.linear_memo)
        return not consecutive or all(_linear(i.src[1], self.linear_memo) == (t0, c0 + k) for k, i in enumerate(idx))

    def seed_stores(self) -> None:
        runs: dict[tuple, dict[int, UOp]] = {}
        for u in sorted(self.pos, key=self.pos.__getitem__):
            if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and len(u.src[0].src) == 2 \
                    and u.src[1].dtype.name in self.spec.dtypes:
                terms, c = _linear(u.src[0].src[1], self.linear_memo)
                runs.setdefault((_buffer(u.src[0]), terms, self.block[u]), {})[c] = u
        # consecutive stores first (one vector store), then stores at one stride: the lanes are still computed
        # as vectors, and each stored alone (a tile of output channels, whose elements lie a channel apart)
        for consecutive in (True, False):
            for by_offset in runs.values():
                offsets = sorted(by_offset)
                for w in self.spec.widths:
                    for i, c in enumerate(offsets):
                        for stride in ((1,) if consecutive else (c2 - c for c2 in offsets[i + 1:])):
                            lanes = tuple(by_offset.get(c + k * stride) for k in range(w))
                            if any(s is None or s in self.plan.lane_of for s in lanes) \
                                    or not self.memory_lanes(lanes, consecutive):  # type: ignore[arg-type]
                                continue
                            values = tuple(s.src[1] for s in lanes)  # type: ignore[union-attr]
                            self.value(values)
                            self.add("store" if consecutive else "scatter", lanes, (values,))  # type: ignore[arg-type]
                            break

    def stores_between(self, lanes: tuple[UOp, ...]) -> bool:
        """Whether a store that may write a lane's element, and is not a lane, lies between the first lane and
        the last: stored with the last lane, a lane would pass it, and two stores to one element keep their order."""
        buf = _buffer(lanes[0].src[0])
        lo, hi = min(self.pos[u] for u in lanes), max(self.pos[u] for u in lanes)
        return any(lo < self.pos[x] < hi and x not in lanes and any(self.may_alias(x, u) for u in lanes)
                   for x in self.stores_of.get(buf, ()))

    def may_alias(self, a: UOp, b: UOp) -> bool:
        """Whether stores `a` and `b` may write one element: not when their indices differ by a constant."""
        if _buffer(a.src[0]) is not _buffer(b.src[0]):
            return False
        (ta, ca), (tb, cb) = _linear(a.src[0].src[1], self.linear_memo), _linear(b.src[0].src[1], self.linear_memo)
        return ta != tb or ca == cb

    def value(self, lanes: tuple[UOp, ...]) -> Pack | None:
        """The pack computing `lanes`, made if it can be; None leaves them scalar. Below lanes that stay
        scalar (an op the backend has no vector form of), their sources may still be packs."""
        if lanes in self.plan.values:
            return self.plan.values[lanes]
        if lanes in self.tried:
            return None
        self.tried.add(lanes)
        u0 = lanes[0]
        if len(set(lanes)) != len(lanes) or any(u in self.plan.lane_of or u not in self.pos for u in lanes) \
                or any(u.op is not u0.op or u.dtype != u0.dtype or u.arg != u0.arg or len(u.src) != len(u0.src)
                       for u in lanes) or len({self.block[u] for u in lanes}) != 1:
            return None
        operands = tuple(tuple(u.src[i] for u in lanes) for i in range(len(u0.src)))
        # a comparison of packed dtypes is a mask: one all-ones or all-zeros integer of that width per lane
        packable = u0.dtype.name in self.spec.dtypes or u0.op in GroupOp.Comparison and u0.src[0].dtype.name in self.spec.dtypes
        if u0.op is Ops.LOAD and u0.dtype.name in self.spec.dtypes:
            regs = tuple(_reg(u.src[0]) for u in lanes)
            if all(r is None for r in regs):
                return self.add("load", lanes) if self.memory_lanes(lanes) else None
            if any(r is None for r in regs):
                return None
            self.accumulators(regs)  # type: ignore[arg-type]
            return self.plan.values.get(lanes)
        if u0.op in self.spec.ops and packable:
            p = self.add("op", lanes, operands)
            for o in operands:
                self.value(o)
            return p
        if u0.op in GroupOp.ALU or u0.op in (Ops.CAST, Ops.BITCAST):
            for o in operands:
                self.value(o)
        return None

    def accumulators(self, regs: tuple[UOp, ...]) -> None:
        """Packs for accumulators `regs` (one per lane): the registers as one, and each of their loads and
        stores, lane by lane, in order. All or none: a scalar access of one lane would see a stale value."""
        if regs in self.tried_groups:
            return
        self.tried_groups.add(regs)
        if len(set(regs)) != len(regs) or any(r in self.plan.lane_of or r not in self.pos for r in regs):
            return
        if any(r.dtype != regs[0].dtype for r in regs) or len({self.block[r] for r in regs}) != 1:
            return
        if not all(self.only_loaded_and_stored(r) for r in regs):
            return
        accesses = [self.reg_access.get(r, []) for r in regs]
        if any(len(a) != len(accesses[0]) for a in accesses):
            return
        grouped = []
        for j in range(len(accesses[0])):
            lanes = tuple(a[j] for a in accesses)
            if any(x.op is not lanes[0].op or x in self.plan.lane_of for x in lanes) \
                    or len({self.block[x] for x in lanes}) != 1:
                return
            grouped.append(lanes)
        packs = [self.add("reg", regs, group=regs)]
        for lanes in grouped:
            if lanes[0].op is Ops.LOAD:
                packs.append(self.add("reg_load", lanes, group=regs))
            else:
                values = tuple(x.src[1] for x in lanes)
                packs.append(self.add("reg_store", lanes, (values,), group=regs))
        self.groups[regs] = packs
        for p in packs:
            if p.kind == "reg_store":
                self.value(p.operands[0])

    def only_loaded_and_stored(self, reg: UOp) -> bool:
        """`reg` is read and written by its own loads and stores only (through AFTERs that order them)."""
        todo = [reg]
        while todo:
            x = todo.pop()
            for y in self.users.get(x, []):
                if y.op is Ops.AFTER and y.src[0] is x:
                    todo.append(y)
                elif y.op not in (Ops.LOAD, Ops.STORE) or y.src[0] is not x:
                    return False
        return True

    # ---------------------------------------------------------------- dropping

    def drop(self, p: Pack) -> None:
        for q in (self.groups.pop(p.group, []) if p.group is not None else [p]):
            if q in self.plan.packs:
                self.plan.packs.remove(q)
                for u in q.lanes:
                    del self.plan.lane_of[u]
                if q.kind in VALUE_KINDS:
                    del self.plan.values[q.lanes]

    def used_as_vector(self, p: Pack) -> bool:
        return any(self.plan.values.get(o) is p for q in self.plan.packs for o in q.operands)

    def prune(self) -> None:
        changed = True
        while changed:
            changed = False
            for p in list(self.plan.packs):
                if p not in self.plan.packs or p.kind not in VALUE_KINDS:
                    continue
                if p.kind != "reg_load" and not self.used_as_vector(p):
                    self.drop(p)
                    changed = True

    # ---------------------------------------------------------------- ordering

    def movable(self, item: int | Pack, steps: tuple[Step, ...]) -> bool:
        """Whether `item` may wait for its sources past later steps: not an access of a register or of a
        buffer the kernel both reads and writes (their order is the program's), nor a loop's end."""
        if isinstance(item, Pack):
            return item.kind in ("load", "op", "store", "scatter")
        u = steps[item].uop
        if u.op in (Ops.LOAD, Ops.STORE):
            return _reg(u.src[0]) is None and not (u.src[0].op is Ops.INDEX and _buffer(u.src[0]) in self.shared)
        return u.op not in (Ops.DEFINE_REG, Ops.END, Ops.RANGE)

    def order(self, steps: tuple[Step, ...]) -> tuple[list[int | Pack], UOp | None, set[UOp]]:
        """Steps (by number) and packs in the order they are rendered: a pack where its last lane was, a step
        where it was, both later where a source is not computed yet (a lane of a pack still to come). Also the
        first node some step waited for in vain (None when there is none), and what was computed by then."""
        out: list[int | Pack] = []
        done: set[UOp] = set()
        waiting: dict[UOp | None, list[int | Pack]] = {}
        loops: list[UOp | None] = [None]

        def sources(item: int | Pack) -> list[UOp]:
            lanes = item.lanes if isinstance(item, Pack) else (steps[item].uop,)
            return [x for u in lanes for x in u.src]

        def missing(item: int | Pack) -> UOp | None:
            return next((x for x in sources(item) if x not in done), None)

        def put(item: int | Pack) -> None:
            out.append(item)
            done.update(item.lanes if isinstance(item, Pack) else (steps[item].uop,))

        def stores(item: int | Pack) -> tuple[UOp, ...]:
            """The memory stores `item` makes."""
            lanes = item.lanes if isinstance(item, Pack) else (steps[item].uop,)
            return tuple(u for u in lanes if u.op is Ops.STORE and u.src[0].op is Ops.INDEX)

        def aliased(item: int | Pack, other: int | Pack) -> bool:
            return any(self.may_alias(a, b) for a in stores(item) for b in stores(other))

        def earlier(item: int | Pack, queue: list[int | Pack]) -> list[int | Pack]:
            """What waits before `item`: ahead of it in its queue, and in the queues of the loops around."""
            outer = [w for b in loops[:-1] for w in waiting.get(b, [])]
            return outer + (queue[:queue.index(item)] if item in queue else queue)

        def blocker(item: int | Pack, queue: list[int | Pack]) -> UOp:
            """What `item` waits for in vain: a source, or one of a waiting store before it that may write the
            same element; else `item` itself (the culprit is then its pack, or none)."""
            for x in (item, *(w for w in earlier(item, queue) if aliased(item, w))):
                gap = missing(x)
                if gap is not None:
                    return gap
            return item.lanes[0] if isinstance(item, Pack) else steps[item].uop

        def ready(item: int | Pack, queue: list[int | Pack]) -> bool:
            # a store never passes a waiting store that may write the same element
            return missing(item) is None and not any(aliased(item, w) for w in earlier(item, queue))

        def flush(block: UOp | None) -> None:
            queue = waiting.get(block, [])
            progress = True
            while progress:
                progress = False
                for item in list(queue):
                    if ready(item, queue):
                        queue.remove(item)
                        put(item)
                        progress = True

        for i, s in enumerate(steps):
            if s.kind == "open":
                out.append(i)
                loops.append(s.uop)
                done.add(s.uop)
                continue
            if s.kind == "close":
                flush(loops[-1])
                if waiting.get(loops[-1]):
                    return out, blocker(waiting[loops[-1]][0], waiting[loops[-1]]), done
                out.append(i)
                loops.pop()
                continue
            hit = self.plan.lane_of.get(s.uop)
            if hit is not None and hit[0].at != i:
                continue
            item: int | Pack = hit[0] if hit is not None else i
            queue = waiting.setdefault(loops[-1], [])
            if ready(item, queue):
                put(item)
                flush(loops[-1])
            elif self.movable(item, steps):
                queue.append(item)
            else:
                return out, blocker(item, queue), done
        flush(None)
        return out, (blocker(waiting[None][0], waiting[None]) if waiting.get(None) else None), done

    def complete(self, order: list[int | Pack]) -> bool:
        """Whether `order` renders every step of the kernel once, itself or as a lane of a pack."""
        ops = sum(len(i.lanes) if isinstance(i, Pack) else self.steps[i].kind == "op" for i in order)
        return ops == len(self.pos) and len(order) - sum(isinstance(i, Pack) for i in order) + \
            sum(len(i.lanes) for i in order if isinstance(i, Pack)) == len(self.steps)

    def culprit(self, x: UOp, done: set[UOp]) -> Pack | None:
        """The pack whose lanes `x` waits for, through values that wait for them."""
        todo, seen = [x], {x}
        while todo:
            y = todo.pop()
            if y in self.plan.lane_of:
                return self.plan.lane_of[y][0]
            for s in y.src:
                if s not in done and s not in seen:
                    seen.add(s)
                    todo.append(s)
        return None
