"""Callbacks used by the examples in docs/rules.md."""


def number_variable(ctx, v):
    ctx.setdefault(v, len(ctx))
    return v.replace(tag=ctx[v])
