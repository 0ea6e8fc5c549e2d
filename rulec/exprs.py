"""The guard and computed-arg expression language.

Expressions use Python syntax, restricted to: literals, names bound by the
pattern, attribute reads from a fixed list, indexing and slicing, arithmetic,
comparisons, boolean logic, conditional expressions, tuples, comprehensions,
and calls of registered helpers. They are parsed and checked at build time and
compiled into the generated matcher; no text is evaluated at run time.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from rulec.runtime.dtype import DTYPE_BY_NAME
from rulec.runtime.helpers import ATTRIBUTES, HELPERS, NAMESPACES
from rulec.runtime.ops import Ops

from .diagnostics import Loc

CAPTURE_PREFIX = "v_"
HELPER_PREFIX = "h_"

_ALLOWED = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Attribute, ast.Subscript, ast.Slice,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List, ast.Call,
    ast.GeneratorExp, ast.ListComp, ast.comprehension,
    ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Div, ast.Pow, ast.USub, ast.UAdd, ast.Not, ast.Invert,
    ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift,
    ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
)


class ExprError(Exception):
    def __init__(self, message: str, offset: int, length: int = 1):
        super().__init__(message)
        self.offset = offset
        self.length = length


@dataclass(eq=False)
class Expr:
    """A checked expression: its text, where it is, the names it reads, and its Python translation."""

    text: str
    loc: Loc
    tree: ast.Expression
    names: set[str] = field(default_factory=set)  # pattern captures it reads
    helpers: set[str] = field(default_factory=set)
    python: str = ""

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def parse_expr(text: str, loc: Loc) -> Expr:
    """Parse and check the syntax of an expression. Names are resolved later, by `bind_names`."""
    src = text.strip()
    lead = len(text) - len(text.lstrip())
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as e:
        col = (e.offset or 1) - 1 if (e.lineno or 1) == 1 else 0
        raise ExprError(f"invalid expression: {e.msg}", lead + col) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ExprError(f"{type(node).__name__} is not allowed in rule expressions", lead + _col(node))
        if isinstance(node, ast.Attribute):
            _check_attribute(node, lead)
        if isinstance(node, ast.Call):
            if node.keywords:
                raise ExprError("keyword arguments are not allowed in rule expressions", lead + _col(node))
            if not isinstance(node.func, ast.Name):
                raise ExprError("only registered helpers can be called: write helper(x), not x.method()",
                                lead + _col(node.func))
        if isinstance(node, ast.comprehension) and (node.is_async or not isinstance(node.target, (ast.Name, ast.Tuple))):
            raise ExprError("comprehensions may only bind plain names", lead + _col(node.target))
    return Expr(text=src, loc=loc.shifted(lead), tree=tree)


def _col(node: ast.AST) -> int:
    return getattr(node, "col_offset", 0)


def _check_attribute(node: ast.Attribute, lead: int) -> None:
    base = node.value
    if isinstance(base, ast.Name) and base.id in NAMESPACES:
        if base.id == "Ops" and node.attr not in Ops.__members__:
            raise ExprError(f"unknown op Ops.{node.attr}", lead + _col(node), len(ast.unparse(node)))
        if base.id == "dtypes" and node.attr not in DTYPE_BY_NAME:
            raise ExprError(f"unknown dtype dtypes.{node.attr}", lead + _col(node), len(ast.unparse(node)))
        return
    if node.attr not in ATTRIBUTES:
        raise ExprError(f"attribute .{node.attr} is not readable in rule expressions "
                        f"(allowed: {', '.join(sorted(ATTRIBUTES))})", lead + node.end_col_offset - len(node.attr) - 1,
                        len(node.attr) + 1)


def bind_names(expr: Expr, bound: set[str]) -> list[tuple[str, int, str]]:
    """Resolve the names of `expr` against the pattern's captures.

    Fills in expr.names, expr.helpers and expr.python, and returns the problems
    as (name, offset into expr.text, "name" | "call").
    """
    unbound: list[tuple[str, int, str]] = []
    local_scopes: list[set[str]] = []

    class Rename(ast.NodeTransformer):
        def visit_GeneratorExp(self, node):
            return self._comp(node)

        def visit_ListComp(self, node):
            return self._comp(node)

        def _comp(self, node):
            names: set[str] = set()
            for gen in node.generators:
                gen.iter = self.visit(gen.iter)
                for t in ast.walk(gen.target):
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                local_scopes.append(names)
                gen.target = self.visit(gen.target)
                gen.ifs = [self.visit(i) for i in gen.ifs]
            node.elt = self.visit(node.elt)
            for _ in node.generators:
                local_scopes.pop()
            return node

        def visit_Name(self, node: ast.Name):
            name = node.id
            if any(name in s for s in local_scopes):
                return ast.copy_location(ast.Name(id="l_" + name, ctx=node.ctx), node)
            if name in bound:
                expr.names.add(name)
                return ast.copy_location(ast.Name(id=CAPTURE_PREFIX + name, ctx=node.ctx), node)
            if name in NAMESPACES:
                return node
            if name in HELPERS:
                expr.helpers.add(name)
                return ast.copy_location(ast.Name(id=HELPER_PREFIX + name, ctx=node.ctx), node)
            if not any(u[0] == name and u[1] == _col(node) for u in unbound):
                unbound.append((name, _col(node), "name"))
            return node

    # a called name must be a helper, never a capture
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in HELPERS:
            unbound.append((node.func.id, _col(node.func), "call"))
    tree = Rename().visit(copy.deepcopy(expr.tree))
    expr.python = ast.unparse(tree)
    return [u for u in unbound if u[2] == "call" or not any(v[2] == "call" and v[1] == u[1] for v in unbound)]
