"""The edits `rulec reduce` tries on a program's syntax tree, grouped into passes.

An edit is a set of operations, each replacing (or deleting, or splicing a list of statements in place of)
the node at a path from the module. A pass lists every edit of one kind on the current tree; the reducer
applies chunks of them at once (rulec/tools/reduce.py). Every edit makes the tree smaller by `size_key`:
fewer nodes, shorter text, or smaller numbers, so reduction always ends.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

# a step from a node to one of its children: (field, index in the field's list, or -1 for a plain field)
Path = tuple[tuple[str, int], ...]
Replacement = ast.AST | list[ast.stmt] | None  # None: delete (or empty a plain field); a list: splice statements


@dataclass(frozen=True)
class Op:
    path: Path
    make: Callable[[ast.AST], Replacement]  # the node at `path` (as it is when applied) -> what replaces it


Edit = tuple[Op, ...]


def walk(tree: ast.AST) -> Iterator[tuple[ast.AST, Path, ast.AST | None, str]]:
    """Every node in pre-order with its path, its parent and the parent's field holding it (no recursion:
    deeply nested expressions are fine)."""
    stack: list[tuple[ast.AST, Path, ast.AST | None, str]] = [(tree, (), None, "")]
    while stack:
        node, path, parent, field = stack.pop()
        yield node, path, parent, field
        children = []
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                children += [(v, path + ((name, i),), node, name) for i, v in enumerate(value) if isinstance(v, ast.AST)]
            elif isinstance(value, ast.AST):
                children.append((value, path + ((name, -1),), node, name))
        stack.extend(reversed(children))


def apply(tree: ast.Module, edits: Sequence[Edit]) -> ast.Module:
    """A copy of `tree` with the edits applied. Operations run deepest and last first, so that each one's path
    is still valid when it runs (an operation changes only its own subtree and the positions after it)."""
    new = copy.deepcopy(tree)
    ops: dict[Path, Op] = {}
    for edit in edits:
        for op in edit:
            ops.setdefault(op.path, op)
    for path in sorted(ops, reverse=True):
        parent: ast.AST = new
        for name, index in path[:-1]:
            parent = getattr(parent, name)[index] if index >= 0 else getattr(parent, name)
        name, index = path[-1]
        if index < 0:
            setattr(parent, name, ops[path].make(getattr(parent, name)))
            continue
        container = getattr(parent, name)
        repl = ops[path].make(container[index])
        if repl is None:
            del container[index]
        elif isinstance(repl, list):
            container[index:index + 1] = repl
        else:
            container[index] = repl
    _fill_empty_blocks(new)
    return new


def _fill_empty_blocks(tree: ast.AST) -> None:
    """A block whose statements were all removed becomes `pass`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and not body:
            node.body = [ast.Pass()]
        if isinstance(node, (ast.Try, ast.TryStar)) and not node.handlers and not node.finalbody:
            node.finalbody = [ast.Pass()]


def size_key(tree: ast.AST, text: str) -> tuple[int, int, float]:
    """The order reduction descends: node count, then characters, then the sum of the numbers' magnitudes."""
    nodes = 0
    numbers = 0.0
    for node in ast.walk(tree):
        nodes += 1
        if _is_number(node):
            numbers += min(abs(node.value), 1e300)  # type: ignore[attr-defined]  # (a huge int is no float)
    return nodes, len(text), numbers


def count_statements(tree: ast.AST) -> int:
    return sum(isinstance(n, ast.stmt) for n in ast.walk(tree))


def _is_number(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool))


def _delete(_: ast.AST) -> None:
    return None


# ---- the passes: each returns the edits of its kind on the current tree, in source order

def statements(tree: ast.Module) -> list[Edit]:
    """Remove one statement, in any block (a block left empty becomes `pass`)."""
    return [(Op(path, _delete),) for node, path, _, _ in walk(tree)
            if isinstance(node, ast.stmt) and not isinstance(node, ast.Pass)]


def dependents(tree: ast.Module) -> list[Edit]:
    """Remove a statement together with the later statements of its block that use a name it binds (and so on):
    a definition and its uses go in one try, which plain statement removal would need luck to find."""
    edits: list[Edit] = []
    for node, path, _, _ in walk(tree):
        for name, value in ast.iter_fields(node):
            if not (isinstance(value, list) and value and isinstance(value[0], ast.stmt)):
                continue
            for i, stmt in enumerate(value):
                bound = _binds(stmt)
                if not bound:
                    continue
                removed = [i]
                for j in range(i + 1, len(value)):
                    if _uses(value[j]) & bound:
                        removed.append(j)
                        bound |= _binds(value[j])
                if len(removed) > 1:
                    edits.append(tuple(Op(path + ((name, j),), _delete) for j in removed))
    return edits


def _binds(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _uses(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def inline(tree: ast.Module) -> list[Edit]:
    """Remove `t = value`, for a name `t` bound nowhere else, writing `value` where `t` is read: `h = x` and
    `out = h @ w` become `out = x @ w` (a value read twice or more is kept unless it is a single node)."""
    binds: dict[str, int] = {}
    for node in ast.walk(tree):
        for name in _bound_here(node):
            binds[name] = binds.get(name, 0) + 1
    reads: dict[str, list[Path]] = {}
    for node, path, _, _ in walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, []).append(path)
    edits: list[Edit] = []
    for node, path, _, _ in walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and binds.get(node.targets[0].id) == 1 and reads.get(node.targets[0].id)):
            value = node.value
            uses = [Op(p, lambda n, v=value: copy.deepcopy(v)) for p in reads[node.targets[0].id]]
            edits.append((Op(path, _delete), *uses))
    return edits


def _bound_here(node: ast.AST) -> list[str]:
    """The names a node binds: stores, function arguments, definitions, imports, `global` and `except as`."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    return []


def assignments(tree: ast.Module) -> list[Edit]:
    """Keep only the value of an assignment: `out = a @ b` -> `a @ b`."""
    return [(Op(path, lambda n: ast.Expr(n.value)),) for node, path, _, _ in walk(tree)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None]


def unwrap(choice: int) -> Callable[[ast.Module], list[Edit]]:
    """Replace a compound statement by one of its blocks: `if`, `for`, `while`, `with`, `try` by their body
    (choice 0), an `if`/`for`/`while` with an `else` by that block (choice 1)."""
    def edits(tree: ast.Module) -> list[Edit]:
        out: list[Edit] = []
        for node, path, _, _ in walk(tree):
            blocks = _blocks(node)
            if choice < len(blocks) and path and path[-1][1] >= 0:
                out.append((Op(path, lambda n, f=blocks[choice]: list(getattr(n, f))),))
        return out
    return edits


def _blocks(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return ["body", "orelse"] if node.orelse else ["body"]
    if isinstance(node, (ast.With, ast.AsyncWith, ast.Try, ast.TryStar)):
        return ["body"]
    return []


def expressions(choice: int) -> Callable[[ast.Module], list[Edit]]:
    """Replace an expression by a part of it: a call chain `a.f(x).g(y)` by `a.f(x)`, `f(x, y)` by `x`,
    `a + b` by `a` (choice 0) or `b` (choice 1), `-a` by `a`, `a[i]` and `a.b` by `a`, `c if t else d` by
    `c` or `d`, a boolean operation or comparison by its first or last operand, `[e for i in r]` by `e`."""
    def edits(tree: ast.Module) -> list[Edit]:
        out: list[Edit] = []
        for node, path, parent, field in walk(tree):
            if not isinstance(node, ast.expr) or isinstance(getattr(node, "ctx", ast.Load()), (ast.Store, ast.Del)):
                continue
            if isinstance(parent, ast.Call) and field == "func":
                continue  # `a.f(x)` -> `a(x)` is never the simpler program
            parts = _parts(node)
            if choice < len(parts):
                out.append((Op(path, parts[choice]),))
        return out
    return edits


def _parts(node: ast.expr) -> list[Callable[[ast.AST], ast.AST]]:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return [lambda n: n.func.value]
        return [lambda n, i=i: n.args[i] for i, a in enumerate(node.args[:2]) if not isinstance(a, ast.Starred)]
    if isinstance(node, ast.BinOp):
        return [lambda n: n.left, lambda n: n.right]
    if isinstance(node, ast.UnaryOp):
        return [lambda n: n.operand]
    if isinstance(node, (ast.Attribute, ast.Subscript, ast.Await)):
        return [lambda n: n.value]
    if isinstance(node, ast.IfExp):
        return [lambda n: n.body, lambda n: n.orelse]
    if isinstance(node, ast.BoolOp):
        return [lambda n: n.values[0], lambda n: n.values[-1]]
    if isinstance(node, ast.Compare):
        return [lambda n: n.left, lambda n: n.comparators[-1]]
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return [lambda n: n.elt]
    return []


def annotations(tree: ast.Module) -> list[Edit]:
    """Drop a type annotation of a function's argument or result."""
    out: list[Edit] = []
    for node, path, _, _ in walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            out.append((Op(path + (("annotation", -1),), lambda n: None),))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            out.append((Op(path + (("returns", -1),), lambda n: None),))
    return out


def keywords(tree: ast.Module) -> list[Edit]:
    """Drop one keyword argument of a call (`**kwargs` included)."""
    return [(Op(path, _delete),) for node, path, parent, _ in walk(tree)
            if isinstance(node, ast.keyword) and isinstance(parent, ast.Call)]


def arguments(tree: ast.Module) -> list[Edit]:
    """Drop one positional argument of a call."""
    return [(Op(path, _delete),) for node, path, parent, field in walk(tree)
            if isinstance(parent, ast.Call) and field == "args"]


def elements(tree: ast.Module) -> list[Edit]:
    """Drop one element of a tuple or list that is read (a shape `(4, 8, 16)` -> `(4, 16)`)."""
    return [(Op(path, _delete),) for node, path, parent, field in walk(tree)
            if isinstance(parent, (ast.Tuple, ast.List)) and field == "elts"
            and isinstance(parent.ctx, ast.Load) and not isinstance(node, ast.Starred)]


def numbers(choice: int) -> Callable[[ast.Module], list[Edit]]:
    """Move a number toward zero: to 0 (choice 0), 1 (choice 1), 2 (choice 2), half of it (choice 3) or one
    less (choice 4), so `Tensor.rand(64, 128)` can become `Tensor.rand(2, 3)`. Floats go to 0.0, 1.0 or their
    integer part."""
    def edits(tree: ast.Module) -> list[Edit]:
        out: list[Edit] = []
        for node, path, _, _ in walk(tree):
            if _is_number(node):
                ladder = _ladder(node.value)  # type: ignore[attr-defined]
                if choice < len(ladder) and ladder[choice] is not None:
                    out.append((Op(path, lambda n, v=ladder[choice]: ast.Constant(v)),))
        return out
    return edits


def _ladder(value: int | float) -> list[int | float | None]:
    """The smaller values tried for `value`, by choice; None where a choice gives nothing smaller."""
    sign = -1 if value < 0 else 1
    mag = abs(value)
    if isinstance(value, int):
        steps: list[int | float] = [0, 1, 2, mag // 2, mag - 1]
    else:
        steps = [0.0, 1.0, float(int(mag)), mag, mag]  # floats are not halved: 0.1 -> 0.05 is no simpler
    return [sign * s if s < mag else None for s in steps]


PASSES: list[tuple[str, Callable[[ast.Module], list[Edit]]]] = [
    ("statements", statements),
    ("dependents", dependents),
    ("inline", inline),
    ("assignments", assignments),
    ("unwrap", unwrap(0)),
    ("unwrap else", unwrap(1)),
    ("expressions", expressions(0)),
    ("expressions (2nd part)", expressions(1)),
    ("annotations", annotations),
    ("keywords", keywords),
    ("arguments", arguments),
    ("elements", elements),
    ("numbers to 0", numbers(0)),
    ("numbers to 1", numbers(1)),
    ("numbers to 2", numbers(2)),
    ("numbers halved", numbers(3)),
    ("numbers minus 1", numbers(4)),
]
