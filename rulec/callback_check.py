"""Callbacks are declared code: where `call:` may point, checked without running anything.

A rule file (or pipeline file) may call functions of two kinds of modules only:
modules it declares in its top-level `callbacks:` list, and modules that sit
beside it. Standard-library and built-in modules are refused, and the named
function must be a `def` written in that module (not imported into it).

`rulec check` finds the module's source file with the import system's finders
(which locate files but execute nothing), parses it with `ast` and reads the
function's parameters from its `def`. Only `rulec build` and loading import
the module; `verify_import` then checks that the name still is a function
defined there.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import re
import importlib.machinery
import sys
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

from rulec.runtime.engine.callback_import import CallbackImportError, is_refused, load_defined

from .diagnostics import Loc, Reporter



PARAM_KINDS = ("node", "nodes", "value", "context")  # a capture, a rest capture, a let value, the stage context
RESULT_KINDS = ("node", "node?", "none")  # always rewrites; rewrites or declines (None); always declines
_SIGNATURE = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*->\s*(\S+)\s*\Z")


@dataclass(frozen=True)
class Signature:
    """A typed callback declaration, `name(context, node, nodes) -> node?`: the kind of each parameter, by
    position, and of the result (as ISLE's `extern` declarations). The names are the def's."""

    function: str
    params: tuple[str, ...]  # kinds, in order
    result: str
    loc: Loc


def parse_signature(text: str, loc: Loc) -> Signature | str:
    """The declaration, or why it is not one."""
    m = _SIGNATURE.match(text)
    if m is None:
        return "a callback declaration reads `function(kind, ...) -> result`"
    name, params_text, result = m.groups()
    if result not in RESULT_KINDS:
        return f"unknown result kind '{result}' (expected one of: {', '.join(RESULT_KINDS)})"
    kinds = tuple(p.strip() for p in params_text.split(",")) if params_text.strip() else ()
    for kind in kinds:
        if kind not in PARAM_KINDS:
            return f"unknown parameter kind '{kind}' (expected one of: {', '.join(PARAM_KINDS)})"
    return Signature(name, kinds, result, loc)


@dataclass
class CallbackScope:
    """The modules one file may call into: those it declares, and those beside it."""

    folder: str  # the folder of the file; its modules need no declaration
    declared: dict[str, Loc] = field(default_factory=dict)
    # typed declarations, module -> function -> signature; a module declared with them allows only those
    signatures: dict[str, dict[str, Signature]] = field(default_factory=dict)
    checked: set[int] = field(default_factory=set)  # declarations already compared with their def


@dataclass(frozen=True)
class Definition:
    """A top-level `def` or `class` found in a module's source."""

    module: str
    name: str
    kind: str  # "function" | "class"
    positional: tuple[str, ...] = ()
    required: int = 0  # positional parameters without a default
    star: bool = False  # *args or **kwargs
    keyword_only: tuple[str, ...] = ()


def check_declarations(scope: CallbackScope, rep: Reporter) -> None:
    """Each declared module must be a module of the user's own that can be found."""
    for module, loc in scope.declared.items():
        if is_refused(module):
            rep.error(loc, f"'{module}' is part of Python's standard library; callbacks must be defined in your own "
                           f"modules", len(module))
        elif _source_of(module, scope.folder) is None:
            rep.error(loc, f"cannot find callback module '{module}' (looked beside the file and on the Python path)",
                      len(module))


def find_definition(module: str, function: str, scope: CallbackScope, loc: Loc, rep: Reporter,
                    what: str = "callback") -> Definition | None:
    """The `def` (or `class`) that `module:function` names, or None after reporting why it is not allowed."""
    if is_refused(module):
        rep.error(loc, f"{what} '{module}:{function}' is in Python's standard library; only functions defined in "
                       f"declared callback modules may be called")
        return None
    beside = _beside(module, scope.folder)
    if module not in scope.declared and not beside:
        top = module.split(".")[0]
        beside_it = f"the package {top}/" if "." in module else f"{top}.py"
        rep.error(loc, f"callback module '{module}' is not declared: list it under `callbacks:` at the top of "
                       f"{Path(loc.file).name}, or put {beside_it} beside it")
        return None
    source = _source_of(module, scope.folder)
    if source is None:
        if beside or module not in scope.declared:
            rep.error(loc, f"cannot find callback module '{module}'")
        return None  # a declared module that cannot be found is reported at its declaration
    try:
        text = source.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(source))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as e:
        rep.error(loc, f"cannot read callback module '{module}' ({source}): {type(e).__name__}: {e}")
        return None
    binding = _last_binding(tree, function)
    if binding is None:
        defined = sorted(_defined_functions(tree))
        close = difflib.get_close_matches(function, defined, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        rep.error(loc, f"module '{module}' has no function '{function}'{hint}")
        return None
    if isinstance(binding, ast.FunctionDef):
        return _function(module, binding)
    if isinstance(binding, ast.ClassDef):
        return Definition(module, function, "class")
    kind = ("an async function" if isinstance(binding, ast.AsyncFunctionDef) else
            "imported into it, not defined there" if isinstance(binding, (ast.Import, ast.ImportFrom)) else
            "bound inside a block" if isinstance(binding, (ast.If, ast.Try, ast.With, ast.For, ast.While)) else
            "a variable, not a function")
    rep.error(loc, f"'{module}:{function}' is {kind} (line {binding.lineno} of {source.name}); a callback must be "
                   f"a def in the module it is named from")
    return None


def verify_import(module: str, function: str, scope: CallbackScope, loc: Loc, rep: Reporter) -> Any:
    """Import the module (this runs its code) and check that the name is a function or class defined there,
    taking the parameters its typed declaration names, if it has one."""
    try:
        fn = load_defined(module, function, [scope.folder])
    except CallbackImportError as e:
        rep.error(loc, str(e))
        return None
    sig = scope.signatures.get(module, {}).get(function)
    if sig is not None:
        try:
            n = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):  # a callable Python cannot describe: the call fails at run time
            return fn
        if n != len(sig.params):
            rep.error(sig.loc, f"callback {function} is declared with {len(sig.params)} parameter(s) but "
                               f"{module}:{function} takes {n}")
    return fn



# ------------------------------------------------------------------ finding a module without running it

def _find_spec(name: str, path: list[str] | None) -> ModuleSpec | None:
    # the meta-path finders only locate files; asking them imports nothing (unlike importlib.util.find_spec,
    # which imports the parent packages)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            return spec
    return None


def _beside(module: str, folder: str) -> bool:
    return importlib.machinery.PathFinder.find_spec(module.split(".")[0], [folder]) is not None


def _source_of(module: str, folder: str) -> Path | None:
    """The .py file of `module`, looking beside the file first, as the build and the loader import it."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    spec: ModuleSpec | None = None
    for i in range(len(parts)):
        name = ".".join(parts[:i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
        elif i == 0:
            spec = importlib.machinery.PathFinder.find_spec(name, [folder]) or _find_spec(name, None)
        else:
            search = spec.submodule_search_locations if spec is not None else None
            spec = _find_spec(name, list(search)) if search is not None else None
        if spec is None:
            return None
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None  # a namespace package, an extension or a frozen module: no Python source to read
    return Path(origin)


def _last_binding(tree: ast.Module, name: str) -> ast.stmt | None:
    """The module-level statement that binds `name` last (what the module's attribute ends up being)."""
    found = None
    for stmt in tree.body:
        if name in _bound_by(stmt):
            found = stmt
    return found


def _bound_by(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
        # a name bound inside a block is bound conditionally: treat it as a rebinding
        return {n for s in ast.walk(stmt) if isinstance(s, ast.stmt) and s is not stmt for n in _bound_by(s)}
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _defined_functions(tree: ast.Module) -> set[str]:
    return {s.name for s in tree.body if isinstance(s, ast.FunctionDef) and not s.name.startswith("_")}


def _function(module: str, node: ast.FunctionDef) -> Definition:
    a = node.args
    positional = tuple(p.arg for p in a.posonlyargs + a.args)
    return Definition(module, node.name, "function", positional, len(positional) - len(a.defaults),
                      a.vararg is not None or a.kwarg is not None, tuple(p.arg for p in a.kwonlyargs))
