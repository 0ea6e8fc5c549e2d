"""Callbacks used by tests/test_dsl.py and tests/test_checks.py."""
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.ir.ops import Ops
from rulec.runtime.ir.uop import UOp

CALLS: list = []


def negate(x):
    return -x


def decline(x):
    """Records its argument and declines, so that the next rule is tried."""
    CALLS.append(x)
    return None


def fold_add(a, b):
    """Adds two CONSTs; declines anything else."""
    if a.op is Ops.CONST and b.op is Ops.CONST:
        return UOp.const(a.dtype, a.arg + b.arg)
    return None


def remember(ctx, v):
    """Records the variable's name in the rewrite context; replaces variables named `zero` by 0."""
    ctx.append(v.arg[0])
    return UOp.const(v.dtype, 0) if v.arg[0] == "zero" else None


def rest_count(srcs):
    return UOp.const(dtypes.index, len(srcs))


# ---- bad callbacks, for tests/test_checks.py

def takes_y(y):
    return None


def takes_star(*srcs):
    return None


def keyword_only(*, x):
    return None


NOT_A_FUNCTION = 3
