"""The guard and computed-arg expression language.

Expressions use Python syntax, restricted to: literals, names bound by the
pattern, attribute reads from a fixed list, indexing and slicing, arithmetic,
comparisons, boolean logic, conditional expressions, tuples, comprehensions,
and calls of registered helpers. They are parsed and checked at build time and
compiled into the generated matcher; no text is evaluated at run time. An
expression may span lines (a `when: |` block), as if it were in parentheses.

This module is the front end of both expression back ends: `parse_expr` checks the syntax and limits,
`bind_names` resolves every name (a rule's capture or let, a comprehension's variable, a helper, a
namespace member) into `Expr.resolved`, the checked tree with a `Ref` on each name. The Python back end
(`python_source`, here) and the egglog back end (emit_egglog.py) both read that tree.
"""
from __future__ import annotations

import ast
import copy
import difflib
import inspect
import operator
import warnings
from dataclasses import dataclass, field
from typing import Callable

from rulec.runtime.ir.dtype import DTYPE_BY_NAME
from rulec.runtime.engine.genlib import ExprLimitError
from rulec.runtime.engine.helpers import (ATTRIBUTES, HELPERS as GENERIC_HELPERS, NAMESPACES, OPERATORS, SEQ_LIMIT,
                                          bounded_lshift, bounded_mul, bounded_pow, bounded_range)
from rulec.runtime.ir.ops import GROUPS, Ops
from rulec.runtime.codegen.helpers import CODEGEN_HELPERS
from rulec.runtime.schedule.helpers import SCHEDULE_HELPERS
from rulec.runtime.schedule.multi import MULTI_HELPERS

from .diagnostics import Loc

# The helpers a rule expression may call: the engine's generic ones, the scheduler's and codegen's. The runtime
# keeps them in separate tables (the engine knows nothing of the scheduler); generated code imports each from
# its own.
HELPER_TABLES = (("rulec.runtime.engine.helpers", "HELPERS", GENERIC_HELPERS),
                 ("rulec.runtime.schedule.helpers", "SCHEDULE_HELPERS", SCHEDULE_HELPERS),
                 ("rulec.runtime.schedule.multi", "MULTI_HELPERS", MULTI_HELPERS),
                 ("rulec.runtime.codegen.helpers", "CODEGEN_HELPERS", CODEGEN_HELPERS))
HELPERS = {name: fn for _, _, table in HELPER_TABLES for name, fn in table.items()}

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


# How disallowed syntax is named in messages; other nodes go by their ast class name.
_SYNTAX_NAMES = {
    "Lambda": "lambda", "NamedExpr": "':='", "Dict": "a dict", "Set": "a set", "DictComp": "a dict comprehension",
    "SetComp": "a set comprehension", "JoinedStr": "an f-string", "Starred": "'*' unpacking", "Await": "await",
    "Yield": "yield", "YieldFrom": "yield", "keyword": "a keyword argument", "MatMult": "'@'",
}

Locate = Callable[[int, str], Loc]  # (offset into the text, token there) -> file position


class ExprError(Exception):
    def __init__(self, message: str, offset: int, length: int = 1):
        super().__init__(message)
        self.offset = offset
        self.length = length


@dataclass(frozen=True)
class Ref:
    """What a name of an expression stands for, as the front end resolved it.

    kind: "bound" (a capture or let of the rule), "local" (a comprehension's variable), "helper", or, on
    the `Attribute` of a namespace member, "op", "group" or "dtype", with the member as `value`.
    """

    kind: str
    name: str
    value: object = None

    def __deepcopy__(self, memo: dict) -> Ref:  # immutable, and `value` (an op, a dtype) is compared by identity
        return self


def ref(node: ast.AST) -> Ref | None:
    """The resolution of a name (or namespace member) of a resolved tree; None where it is not one."""
    return getattr(node, "ref", None)


@dataclass(eq=False)
class Expr:
    """A checked expression: its text, where it is, the names it reads, its resolved tree and its
    Python translation."""

    text: str
    loc: Loc
    tree: ast.Expression
    names: set[str] = field(default_factory=set)  # pattern captures it reads
    resolved: ast.Expression | None = None  # `tree` with a Ref on every resolved name (by bind_names)
    helpers: set[str] = field(default_factory=set)
    python: str = ""
    first_line: int = 1  # the line of `tree` that holds the first line of `text`
    at: Locate | None = None  # maps offsets into `text` to file positions, across lines

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def loc_at(self, offset: int, token: str = "") -> Loc:
        """The file position of character `offset` of the text."""
        return self.at(offset, token) if self.at is not None else self.loc.shifted(offset)

    def offset(self, lineno: int, col: int, utf8: bool = True) -> int:
        """The offset into `text` of a position of the parsed tree (ast columns count UTF-8 bytes)."""
        return _offset(self.text, self.first_line, lineno, col, utf8)


def _offset(src: str, first_line: int, lineno: int, col: int, utf8: bool = True) -> int:
    lines = src.split("\n")
    k = lineno - first_line
    if k < 0:
        return 0
    if k >= len(lines):
        return len(src)
    line = lines[k]
    if utf8:
        col = len(line.encode()[:col].decode(errors="ignore"))
    return sum(len(ln) + 1 for ln in lines[:k]) + max(0, min(col, len(line)))


def parse_expr(text: str, loc: Loc, locate: Locate | None = None) -> Expr:
    """Parse and check the syntax of an expression. Names are resolved later, by `bind_names`.

    `locate` maps offsets into `text` to file positions; without it the text is taken to be one line at `loc`.
    Offsets in an ExprError are offsets into `text`.
    """
    src = text.strip()
    lead = len(text) - len(text.lstrip())
    # Python only continues an expression over lines inside brackets
    first_line = 2 if "\n" in src else 1
    try:
        with warnings.catch_warnings():  # Python's own warnings (e.g. `1if`) must not reach the user
            warnings.simplefilter("ignore")
            tree = ast.parse(f"(\n{src}\n)" if first_line == 2 else src, mode="eval")
    except SyntaxError as e:
        lineno, col = e.lineno or first_line, (e.offset or 0) - 1
        if col < 0:  # the error is at the end of the line
            col = len((src.split("\n") + [""])[max(0, lineno - first_line)])
        raise ExprError(f"invalid expression: {e.msg}", lead + _offset(src, first_line, lineno, col, False)) from None
    except (RecursionError, MemoryError):  # Python's parser gives up on very deep nesting
        raise ExprError(f"expression nested more than {MAX_DEPTH} levels deep", lead, len(src.split("\n")[0])) from None
    if _depth(tree) > MAX_DEPTH:  # the checks and code generation below recurse over the tree
        raise ExprError(f"expression nested more than {MAX_DEPTH} levels deep", lead, len(src.split("\n")[0]))
    at = (lambda off, tok="": locate(lead + off, tok)) if locate is not None else None
    expr = Expr(text=src, loc=locate(lead, "") if locate is not None else loc.shifted(lead), tree=tree,
                first_line=first_line, at=at)

    def fail(message: str, node: ast.AST, length: int | None = None) -> ExprError:
        start = expr.offset(node.lineno, node.col_offset)
        if length is None:  # the whole node, when it is on one line
            end = expr.offset(node.end_lineno, node.end_col_offset)
            length = end - start if node.end_lineno == node.lineno else 1
        return ExprError(message, lead + start, max(1, length))

    # disallowed syntax first, so that `(lambda: 1)()` is reported as a lambda, not as a call
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            what = _SYNTAX_NAMES.get(type(node).__name__, type(node).__name__)
            at = node
            while not hasattr(at, "lineno") and at in parents:  # operators have no position: use their expression
                at = parents[at]
            raise fail(f"{what} is not allowed in rule expressions", at)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            _check_attribute(node, expr, lead)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                f = node.func
                end = expr.offset(f.end_lineno, f.end_col_offset)
                raise ExprError(f"only registered helpers can be called: write helper(x), not x.{f.attr}()",
                                lead + end - len(f.attr) - 1, len(f.attr) + 1)
            if not isinstance(node.func, ast.Name):
                raise fail("only registered helpers can be called, by name: helper(x)", node.func)
            problem = _arity_problem(node.func.id, len(node.args))
            if problem:
                raise fail(problem, node)
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.Is, ast.IsNot)) and _is_value_literal(right):
                    raise fail(f"'{'is' if isinstance(op, ast.Is) else 'is not'}' with a literal tests identity: "
                               f"use {'==' if isinstance(op, ast.Is) else '!='}", node)
        if isinstance(node, ast.comprehension) and (node.is_async or not isinstance(node.target, (ast.Name, ast.Tuple))):
            raise fail("comprehensions may only bind plain names", node.target)
    _check_limits(expr.tree, fail)
    # Python warns about some sure errors only when it compiles, as in `[1, 2] [0, 1]`; so compile it now
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile(tree, "<rule expression>", "eval")
    for w in caught:
        if issubclass(w.category, SyntaxWarning):
            raise ExprError(f"invalid expression: {w.message}", lead, len(src.split("\n")[0]))
    return expr


# ------------------------------------------------------------------ limits
# The operators that can build a huge value from small operands run bounded (runtime/engine/helpers.py):
# `**`, `<<`, `*` and `%` (formatting a string) compile to these calls. Where their operands are
# constants the same functions run here, at check time, so `9**9**9` is an error in the rule file
# rather than a hang at build.
_BOUNDED_OPS = {ast.Pow: "_op_pow", ast.LShift: "_op_lshift", ast.Mult: "_op_mul", ast.Mod: "_op_mod"}
assert set(_BOUNDED_OPS.values()) <= set(OPERATORS)
_FOLD_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: bounded_mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: bounded_pow, ast.LShift: bounded_lshift, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}  # not `%`: with a string on the left it formats, and '%0999999999d' is as large as it looks
_FOLD_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
_UNKNOWN = object()
MAX_DEPTH = 200  # syntax-tree levels: far beyond a readable guard, well within Python's recursion limit


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:  # iterative: the depth is what is being measured
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_limits(tree: ast.Expression, fail: Callable[..., ExprError]) -> None:
    """Refuse what is unbounded on its face: constant operands past a limit, nested generated loops."""
    _fold(tree.body, fail)
    _check_loops(tree.body, 1, fail)


def _fold(node: ast.AST, fail: Callable[..., ExprError]) -> object:
    """The value of a constant subexpression (else _UNKNOWN), computed with the run-time limits."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left, fail), _fold(node.right, fail)
        if isinstance(node.op, ast.Mod) and isinstance(a, (str, bytes)):
            raise fail("string formatting with % is not allowed in rule expressions", node)
        return _apply(_FOLD_BINOPS.get(type(node.op)), (a, b), node, fail)
    if isinstance(node, ast.UnaryOp):
        return _apply(_FOLD_UNOPS.get(type(node.op)), (_fold(node.operand, fail),), node, fail)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_fold(e, fail) for e in node.elts]
        return _UNKNOWN if _UNKNOWN in items else (tuple if isinstance(node, ast.Tuple) else list)(items)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        return _apply(bounded_range, tuple(_fold(a, fail) for a in node.args), node, fail)
    for child in ast.iter_child_nodes(node):
        _fold(child, fail)
    return _UNKNOWN


NOT_CONSTANT = _UNKNOWN


def constant_value(expr: Expr) -> object:
    """The value of an expression of literals and arithmetic alone (`None`, `0`, `1 - 1`), else NOT_CONSTANT."""
    try:
        return _fold(expr.tree.body, lambda message, node, length=None: ExprError(message, 0))
    except ExprError:  # past a limit: reported when the expression was parsed
        return NOT_CONSTANT


def _apply(fn: Callable | None, args: tuple, node: ast.AST, fail: Callable[..., ExprError]) -> object:
    if fn is None or any(a is _UNKNOWN for a in args):
        return _UNKNOWN
    try:
        return fn(*args)
    except ExprLimitError as e:
        raise fail(f"too large: {e}", node) from None
    except Exception:  # a type or value error is the run time's to report, with the values it sees
        return _UNKNOWN


# Loops over the graph's own data (`for s in x.src`) nested in one another: n sources nested k deep run
# n**k times, and a SINK may have thousands of sources
MAX_GRAPH_LOOP_NESTING = 2


def _check_loops(node: ast.AST, size: int, fail: Callable[..., ExprError], graph_loops: int = 0) -> None:
    """Comprehensions: the sequences an expression builds itself (range(), `*`) and loops over,
    multiplied along any path of nested loops, stay within SEQ_LIMIT items.

    A built sequence of unknown length counts as SEQ_LIMIT; loops over the graph's own data are bounded
    by the graph and count as one, but at most MAX_GRAPH_LOOP_NESTING of them may nest.
    """
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        for gen in node.generators:
            _check_loops(gen.iter, size, fail, graph_loops)
            if _builds_sequence(gen.iter):
                value = _fold(gen.iter, fail)
                size *= max(1, len(value)) if isinstance(value, (range, tuple, list, str, bytes)) else SEQ_LIMIT
                if size > SEQ_LIMIT:
                    raise fail(f"nested loops over range() or repeated sequences may run more than {SEQ_LIMIT} "
                               "times in all: their sizes multiply", gen.iter)
            elif _fold(gen.iter, fail) is _UNKNOWN:
                graph_loops += 1
                if graph_loops > MAX_GRAPH_LOOP_NESTING:
                    raise fail(f"loops over the graph's data may nest at most {MAX_GRAPH_LOOP_NESTING} deep "
                               f"(n sources nested k deep run n**k times)", gen.iter)
            for cond in gen.ifs:
                _check_loops(cond, size, fail, graph_loops)
        _check_loops(node.elt, size, fail, graph_loops)
        return
    for child in ast.iter_child_nodes(node):
        _check_loops(child, size, fail, graph_loops)


def _builds_sequence(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range")
               or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)) for n in ast.walk(node))


def _bounded_call(node: ast.BinOp) -> ast.AST:
    """`a ** b`, `a << b`, `a * b`, `a % b` as a call of the bounded operator; plain where it cannot grow."""
    name = _BOUNDED_OPS.get(type(node.op))
    if name is None:
        return node
    consts = [x for x in (node.left, node.right) if isinstance(x, ast.Constant)]
    if len(consts) == 2 or any(isinstance(c.value, float) for c in consts):
        return node  # checked when the rule file was, or a float: it overflows with an error, quickly
    return ast.copy_location(ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[node.left, node.right],
                                      keywords=[]), node)


def _arity_problem(name: str, n_args: int) -> str | None:
    """Why a registered helper can't take `n_args` positional arguments, or None (also for builtins such as
    max() whose signature Python does not expose: those fail at run time, naming the rule)."""
    fn = HELPERS.get(name)
    if fn is None:
        return None  # not a helper: reported when names are bound
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(n_args))
    except TypeError as e:
        return f"{name}() cannot take {n_args} argument{'s' * (n_args != 1)}: {e}"
    return None


def _is_value_literal(node: ast.AST) -> bool:
    """A number, string or tuple literal: `x is 1` is never what is meant (None, True, False are fine)."""
    if isinstance(node, ast.Constant):
        return node.value is not None and not isinstance(node.value, bool) and node.value is not ...
    return isinstance(node, ast.Tuple) or (isinstance(node, ast.UnaryOp) and _is_value_literal(node.operand))


def _check_attribute(node: ast.Attribute, expr: Expr, lead: int) -> None:
    base = node.value
    start = lead + expr.offset(node.lineno, node.col_offset)
    end = lead + expr.offset(node.end_lineno, node.end_col_offset)
    if isinstance(base, ast.Name) and base.id in NAMESPACES:
        if base.id == "Ops" and node.attr not in Ops.__members__:
            raise ExprError(f"unknown op Ops.{node.attr}{_suggest(node.attr, Ops.__members__)}", start, end - start)
        if base.id == "GroupOp" and node.attr not in GROUPS:
            raise ExprError(f"unknown op group GroupOp.{node.attr}{_suggest(node.attr, GROUPS)}", start, end - start)
        if base.id == "dtypes" and node.attr not in DTYPE_BY_NAME:
            raise ExprError(f"unknown dtype dtypes.{node.attr}{_suggest(node.attr, DTYPE_BY_NAME)}", start,
                            end - start)
        return
    if node.attr not in ATTRIBUTES:
        raise ExprError(f"attribute .{node.attr} is not readable in rule expressions "
                        f"(allowed: {', '.join(sorted(ATTRIBUTES))})", end - len(node.attr) - 1, len(node.attr) + 1)


def _suggest(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_NAMESPACE_REFS = {"Ops": "op", "GroupOp": "group", "dtypes": "dtype"}
assert set(_NAMESPACE_REFS) == set(NAMESPACES)


def bind_names(expr: Expr, bound: set[str]) -> list[tuple[str, int, str]]:
    """Resolve the names of `expr` against the rule's captures and lets (`bound`).

    Fills in expr.resolved, expr.names, expr.helpers and expr.python, and returns the problems
    as (name, offset into expr.text, kind): "name" is not bound, "call" is not a helper,
    "shadowed" is a helper called where a capture of the same name hides it.
    """
    unbound: list[tuple[str, int, str]] = []
    local_scopes: list[set[str]] = []

    class Resolve(ast.NodeVisitor):
        def visit_GeneratorExp(self, node):
            self._comp(node)

        def visit_ListComp(self, node):
            self._comp(node)

        def _comp(self, node):
            for gen in node.generators:  # each generator sees the variables of those before it
                self.visit(gen.iter)
                local_scopes.append({t.id for t in ast.walk(gen.target) if isinstance(t, ast.Name)})
                self.visit(gen.target)
                for cond in gen.ifs:
                    self.visit(cond)
            self.visit(node.elt)
            del local_scopes[len(local_scopes) - len(node.generators):]

        def visit_Attribute(self, node: ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id in NAMESPACES and not _is_local(base.id) and base.id not in bound:
                # members were checked by parse_expr; a capture of that name is refused by the checker
                node.ref = Ref(_NAMESPACE_REFS[base.id], node.attr, getattr(NAMESPACES[base.id], node.attr))
            self.generic_visit(node)

        def visit_Name(self, node: ast.Name):
            name = node.id
            if _is_local(name):
                node.ref = Ref("local", name)
            elif name in bound:
                expr.names.add(name)
                node.ref = Ref("bound", name)
            elif name in NAMESPACES:
                node.ref = Ref("namespace", name)
            elif name in HELPERS:
                expr.helpers.add(name)
                node.ref = Ref("helper", name)
            else:
                off = expr.offset(node.lineno, node.col_offset)
                if not any(u[0] == name and u[1] == off for u in unbound):
                    unbound.append((name, off, "name"))

    def _is_local(name: str) -> bool:
        return any(name in s for s in local_scopes)

    # a called name must be a helper, never a capture
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name not in HELPERS or name in bound:
                kind = "call" if name not in HELPERS else "shadowed"
                unbound.append((name, expr.offset(node.func.lineno, node.func.col_offset), kind))
    expr.resolved = copy.deepcopy(expr.tree)
    Resolve().visit(expr.resolved)
    expr.python = python_source(expr.resolved)
    return [u for u in unbound if u[2] != "name" or not any(v[2] != "name" and v[1] == u[1] for v in unbound)]


# ------------------------------------------------------------------ the Python back end
_PREFIXES = {"bound": CAPTURE_PREFIX, "local": "l_", "helper": HELPER_PREFIX}


def python_source(resolved: ast.Expression) -> str:
    """The Python source of a resolved expression, for the generated matcher: names become the matcher's
    variables, and the operators that can build huge values call their bounded forms."""

    class Lower(ast.NodeTransformer):
        def visit_BinOp(self, node: ast.BinOp):
            self.generic_visit(node)
            return _bounded_call(node)

        def visit_Name(self, node: ast.Name):
            r = ref(node)
            prefix = _PREFIXES.get(r.kind, "") if r is not None else ""
            return ast.copy_location(ast.Name(id=prefix + node.id, ctx=node.ctx), node) if prefix else node

    return ast.unparse(Lower().visit(copy.deepcopy(resolved)))
