"""Deterministic index-arithmetic graphs for benchmarks, shaped like a scheduler's index math."""
from __future__ import annotations

import random

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.uop import UOp


def index_graph(target_nodes: int, seed: int = 0) -> UOp:
    """A SINK over many index expressions with heavy sharing, about `target_nodes` nodes in all.

    About half of the expressions contain something the symbolic rules can simplify
    (x+0, x*1, x-x, (x*c)//c, (x*c+r)%c with r < c, constant subtrees, decided comparisons).
    """
    rng = random.Random(seed)
    c = lambda v: UOp.const(dtypes.index, v)  # noqa: E731
    ranges = [UOp.range(rng.choice([2, 4, 8, 16, 32, 64]), i) for i in range(8)]
    variables = [UOp.variable(f"v{i}", 0, rng.choice([7, 15, 255])) for i in range(4)]
    pool: list[UOp] = ranges + variables
    roots: list[UOp] = []
    seen: dict[UOp, None] = {}
    count = 0

    def pick() -> UOp:
        # recent nodes are likelier, so expressions nest and share
        return pool[-1 - min(int(rng.expovariate(0.05)), len(pool) - 1)]

    while count < target_nodes:
        a, b = pick(), pick()
        k = rng.choice([2, 3, 4, 8, 16])
        r = rng.choice(ranges)
        kind = rng.randrange(12)
        if kind == 0:
            e = (a * k + r) // k if r.src[0].arg <= k else a * k + r
        elif kind == 1:
            e = (a * k + r) % k
        elif kind == 2:
            e = (a + 0) * 1
        elif kind == 3:
            e = a - a + b
        elif kind == 4:
            e = (c(rng.randrange(1, 9)) * c(rng.randrange(1, 9)) + a) + c(rng.randrange(-4, 5))
        elif kind == 5:
            e = (r < r.src[0].arg + rng.randrange(0, 3)).where(a, b)
        elif kind == 6:
            e = r % (r.src[0].arg + rng.randrange(0, 3))
        elif kind == 7:
            e = a.maximum(b) + a * k
        elif kind == 8:
            e = (a * k) // k
        elif kind == 9:
            e = (a + k) + rng.randrange(1, 5)
        elif kind == 10:
            e = a * b + (a // k)
        else:
            e = (a + b) * k
        pool.append(e)
        roots.append(e)
        # count new nodes only: walking a whole toposort per expression would be quadratic
        stack = [e]
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen[u] = None
            count += 1
            stack.extend(u.src)
    return UOp.sink(*roots)
