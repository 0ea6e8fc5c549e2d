"""rules/ops.yaml, the op table, checked like a rule file (`rulec check rules/ops.yaml`).

runtime/ir/ops.py builds the `Ops` enum from this file when rulec is imported; a mistake
here would otherwise surface as a traceback at import time or as a silently wrong
table. Every problem is a `file:line:col` diagnostic.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from .diagnostics import Reporter
from .source import YNode, load_yaml

TABLE_KEYS = ("ops", "groups")
OP_KEYS = ("arity", "commutative", "cost", "dtype")
RESULT_DTYPES = ("src0", "src1", "bool", "index", "void")
BUILTIN_GROUPS = ("All", "Commutative")
OP_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]*\Z")  # patterns tell ops (UPPERCASE) from captures (lowercase)
GROUP_NAME_RE = re.compile(r"[A-Z][A-Za-z0-9_]*\Z")


def is_op_table(path: str | Path) -> bool:
    return Path(path).name == "ops.yaml"


def check_op_table(path: str, text: str, rep: Reporter) -> None:
    root = load_yaml(path, text)
    if root is None or not isinstance(root.value, dict):
        rep.error(root.loc if root is not None else None, "the op table maps `ops` and `groups`")
        return
    for key in root.value:
        if key not in TABLE_KEYS:
            _unknown(rep, root, key, TABLE_KEYS, "op table key")
    ops = root.get("ops")
    if ops is None or not isinstance(ops.value, dict) or not ops.value:
        rep.error(ops.loc if ops is not None else root.loc, "the op table needs an `ops` mapping of op names")
        return
    for name, spec in ops.value.items():
        _check_op(name, spec, ops, rep)
    groups = root.get("groups")
    if groups is not None:
        _check_groups(groups, set(ops.value), rep)


def _unknown(rep: Reporter, node: YNode, key: str, allowed, what: str) -> None:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of: {', '.join(allowed)})"
    rep.error(node.key_locs[key], f"unknown {what} '{key}'{hint}", len(key))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_op(name: str, spec: YNode, ops: YNode, rep: Reporter) -> None:
    loc = ops.key_locs[name]
    if not OP_NAME_RE.match(name):
        rep.error(loc, f"op name '{name}' must be UPPERCASE (letters, digits and '_')", len(name))
    if spec.value is None:
        return  # `NAME:` with nothing: all defaults
    if not isinstance(spec.value, dict):
        rep.error(spec.loc, f"op {name} takes a mapping of {', '.join(OP_KEYS)}")
        return
    for key in spec.value:
        if key not in OP_KEYS:
            _unknown(rep, spec, key, OP_KEYS, "op key")
    arity = spec.get("arity")
    if arity is not None and not (_is_int(arity.value) and arity.value >= 0):
        rep.error(arity.loc, f"arity of {name} must be a whole number of sources, not {arity.raw or arity.value!r}")
    comm = spec.get("commutative")
    if comm is not None:
        if not isinstance(comm.value, bool):
            rep.error(comm.loc, f"commutative must be true or false, not {comm.raw or comm.value!r}")
        elif comm.value and (arity is None or arity.value != 2):
            rep.error(comm.loc, f"commutative op {name} must have arity 2 (its two sources are swapped)")
    cost = spec.get("cost")
    if cost is not None and not (_is_int(cost.value) and cost.value >= 0):
        rep.error(cost.loc, f"cost of {name} must be a whole number >= 0, not {cost.raw or cost.value!r}")
    dtype = spec.get("dtype")
    if dtype is not None and dtype.value not in RESULT_DTYPES:
        close = difflib.get_close_matches(str(dtype.value), RESULT_DTYPES, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"one of {', '.join(RESULT_DTYPES)}"
        rep.error(dtype.loc, f"unknown result dtype rule '{dtype.value}' ({hint})", len(str(dtype.raw or "x")))


def _check_groups(groups: YNode, ops: set[str], rep: Reporter) -> None:
    if not isinstance(groups.value, dict):
        rep.error(groups.loc, "groups map group names to lists of ops and groups")
        return
    names = set(groups.value) | set(BUILTIN_GROUPS)
    for name, members in groups.value.items():
        loc = groups.key_locs[name]
        if name in BUILTIN_GROUPS:
            rep.error(loc, f"group {name} is built in and cannot be redefined", len(name))
        elif name in ops:
            rep.error(loc, f"group {name} has the name of an op", len(name))
        elif not GROUP_NAME_RE.match(name):
            rep.error(loc, f"group name '{name}' must start with a capital letter", len(name))
        if not isinstance(members.value, list):
            rep.error(members.loc, f"group {name} must be a list of ops and groups")
            continue
        for m in members.value:
            if not isinstance(m.value, str):
                rep.error(m.loc, f"group {name} lists op and group names, not {m.raw or m.value!r}")
            elif m.value not in ops and m.value not in names:
                close = difflib.get_close_matches(m.value, sorted(ops | names), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                rep.error(m.loc, f"group {name} names unknown op or group '{m.value}'{hint}", len(m.value))
    _check_group_cycles(groups, rep)


def _check_group_cycles(groups: YNode, rep: Reporter) -> None:
    graph = {name: [m for m in (v.value if isinstance(v.value, list) else []) if m.value in groups.value]
             for name, v in groups.value.items()}
    reported: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        for m in graph[name]:
            if m.value in stack + (name,):
                cycle = stack[stack.index(m.value):] + (name, m.value) if m.value != name else (name, name)
                if m.value not in reported:
                    reported.add(m.value)
                    rep.error(m.loc, f"group cycle: {' -> '.join(cycle)}", len(m.value))
            elif m.value not in done:
                visit(m.value, stack + (name,))
        done.add(name)

    done: set[str] = set()
    for g in graph:
        if g not in done:
            visit(g, ())
