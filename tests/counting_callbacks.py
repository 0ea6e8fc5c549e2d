"""Callbacks used by tests/test_engine.py."""
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.rewrite import RewriteNotReady
from rulec.runtime.ir.uop import UOp

SEEN: list = []


def count(a):
    SEEN.append(a)
    return None


def wait_until_two(ctx, v):
    ctx[v] = None
    if len(ctx) < 2:
        raise RewriteNotReady
    return UOp.const(dtypes.index, 0)


def never_ready(ctx):
    raise RewriteNotReady
