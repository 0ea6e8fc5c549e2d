"""The egglog engine: graph -> e-graph, bounded equality saturation, cost-based extraction, back.

`run_egglog(ruleset, graph)` runs the pure rules of a compiled rule set (its `<name>.egg`
program, written by rulec/emit_egglog.py) on a UOp graph with egglog's low-level bindings:

1. **Encode.** Every node of an op the program names becomes a typed constructor
   `(OP dtype source... arg... tag)`: the dtype as its key (`int32`, `float32`, `void`,
   `float32*16*global`); the sources of a variable-arity op as one `Srcs` list (SCons/SNil);
   CONST, DEFINE_VAR, RANGE and SPECIAL with their arg's parts, a float constant as `(FCONST dtype bits tag)`;
   every other non-elementwise op with an *arg reference* (ArgTable), and the tag as one too.
   What is left (other ops, args a field cannot hold) is an opaque leaf `(Opaque id)` that points
   back at the Python node; its sources are encoded as well, so rules still rewrite below it.
   Nodes go in as tab-separated `input` files plus one load rule per constructor, with `(Ref id)`
   (`(LRef id)` for a source list) as the handle of node `id`, so sharing is kept and insertion is
   linear.
2. **Analyse.** vmin/vmax of every input node are seeded from `runtime/ir/bounds.py`; the
   `analysis` ruleset derives the bounds of the nodes that rules create, rendered from the
   same table as bounds.py (`runtime/ir/bounds_table.py`).
3. **Run.** Each round runs `analysis` to a fixed point (bounded), then `rules` once (and
   `comm`, the commutativity rules, when asked). It stops when a round changes nothing, or at
   the round, e-node or time bound.
4. **Extract.** A pure-Python bottom-up (Knuth) pass over `eg.freeze()` picks the cheapest
   e-node of every e-class, with the costs of rules/ops.yaml; ties go to the nodes of the
   input graph, so a graph no rule touches comes back as the very same object. Subsumed e-nodes
   (the matches of lowering rules, the other forms of constants) are never picked.
5. **Decode** with a memo per e-class, so the result shares what the e-graph shares.

The encoding (constructor fields, dtypes, string escaping) is defined here, in one place; the
compiler writes the program text from it (rulec/egglog_prelude.py, rulec/emit_egglog.py).
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
import shutil
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rulec.runtime.ir.dtype import DTYPE_BY_NAME, AddrSpace, DType, PtrDType
from rulec.runtime.ir.ops import GROUPS, OP_INFO, Ops
from rulec.runtime.ir.uop import UOp

class EngineError(RuntimeError):
    """A rule set that the egglog engine cannot run, or a program egglog refused."""


ENCODING_VERSION = 4  # bump whenever the prelude, the rulesets or the schedule contract change
REQUIRED_SECTIONS = ("prelude", "analysis", "prune", "comm", "support")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# The dtypes whose vmin/vmax the e-graph tracks: integers, index and bool (exact in i64). Every other dtype
# (floats, void, pointers) is held too, as its key (dtype_key), without bounds.
INT_KINDS = ("int", "uint", "index", "bool")
EGG_DTYPES: dict[str, DType] = {name: d for name, d in DTYPE_BY_NAME.items()
                                if d.name == name and d.kind in INT_KINDS}
SCALAR_DTYPES: dict[str, DType] = {name: d for name, d in DTYPE_BY_NAME.items() if d.name == name}

# Ops with an arg of their own; every other encoded op must have arg None.
# A SPECIAL (a GPU thread id) holds its dimension, so rules can build one (`(SPECIAL n :arg 0)`).
ARG_OPS = {"CONST": ("i64",), "DEFINE_VAR": ("String", "i64", "i64"), "RANGE": ("i64", "String"),
           "SPECIAL": ("i64",)}
# ARG_OPS whose arg is one integer, held as it is (a literal :arg, `.arg` an integer in guards)
INT_ARG_OPS = frozenset({"CONST", "SPECIAL"})

# Always declared, whatever the rules mention: the index arithmetic the analysis understands.
CORE_OPS = ("CONST", "DEFINE_VAR", "RANGE", "ADD", "SUB", "MUL", "IDIV", "MOD", "MAX", "NEG", "CMPLT",
            "CMPNE", "CMPEQ", "WHERE", "AND", "OR", "XOR", "CAST", "BIND")

# Elementwise ops never carry an arg: their constructors have no arg field. Every other op (but the
# ARG_OPS) carries an *arg reference*: an i64 naming its arg (see ArgTable).
PLAIN_OPS = frozenset(GROUPS["Elementwise"])

# A float constant: its dtype and the bit pattern of its value as a float64 (exact, NaN and -0.0 included).
# Integer and bool constants, and the constants rules build from integers, are (CONST dtype value).
FLOAT_CONST = "FCONST"

# arg references: 0 is None, -v the op Ops(v), NODE_ARG_BASE + i the input node i, and 1.. the other args of
# a run, by value (a table of that run)
ARG_NONE = 0
NODE_ARG_BASE = 1 << 40


def op_arg_ref(op: Ops) -> int:
    return -int(op)


def variadic(op: Ops) -> bool:
    """Ops with a variable number of sources: their sources are one `Srcs` list, (SCons a (SCons b (SNil)))."""
    return op is not Ops.CONST and OP_INFO[op].arity is None


def encodable(op: Ops) -> bool:
    """Every op gets a typed constructor (variable-arity ones hold a source list)."""
    return True


def arity(op: Ops) -> int:
    """The number of source fields of an op's constructor (1, the list, for a variadic op)."""
    if op is Ops.CONST:
        return 0
    return 1 if variadic(op) else OP_INFO[op].arity  # type: ignore[return-value]


def arg_fields(op: Ops) -> tuple[str, ...]:
    if op.name in ARG_OPS:
        return ARG_OPS[op.name]
    return () if op in PLAIN_OPS else ("i64",)


def op_cost(op: Ops) -> int:
    return max(1, OP_INFO[op].cost)


OPAQUE_COST = 1


def ctor_fields(op: Ops) -> list[str]:
    """Field sorts of an op's constructor: dtype, then sources (Node each, or one Srcs list), then arg parts
    (RANGE: end, idx, kind; an arg reference for the ops that are neither elementwise nor ARG_OPS), then
    the tag, a reference like an arg's (0: None)."""
    srcs = ["Srcs"] if variadic(op) else ["Node"] * arity(op)
    return ["String"] + srcs + list(arg_fields(op)) + ["i64"]


FLOAT_CONST_FIELDS = ["String", "i64", "i64"]  # dtype, float64 bits, tag


def dtype_key(dt: Any) -> str | None:
    """The string a dtype is in the e-graph: a scalar's name, or `base*size*addrspace` for a pointer."""
    if isinstance(dt, PtrDType):
        base = dt.base
        if base is None or SCALAR_DTYPES.get(base.name) is not base:
            return None
        return f"{base.name}*{dt.size}*{dt.addrspace.value}"
    name = getattr(dt, "name", None)
    return name if name is not None and SCALAR_DTYPES.get(name) is dt else None


def dtype_of_key(key: str) -> DType:
    if "*" in key:
        base, size, space = key.split("*")
        return SCALAR_DTYPES[base].ptr(int(size), AddrSpace(space))
    return SCALAR_DTYPES[key]


def float_bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", v))[0]


def bits_float(b: int) -> float:
    return struct.unpack("<d", struct.pack("<q", b))[0]


class ArgTable:
    """The args of one run that egglog holds by reference: equal args (same type, equal value) share an id."""

    def __init__(self) -> None:
        self.values: list[Any] = [None]
        self.index: dict[Any, int] = {}

    def ref(self, v: Any) -> int:
        if v is None:
            return ARG_NONE
        if type(v) is Ops:
            return op_arg_ref(v)
        try:
            key: Any = (type(v), v)
            hash(key)
        except TypeError:  # unhashable: by identity
            key = ("id", id(v))
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.values)
            self.values.append(v)
        return i

    def value(self, i: int, nodes: list[UOp]) -> Any:
        if i == ARG_NONE:
            return None
        if i < 0:
            return Ops(-i)
        if i >= NODE_ARG_BASE:
            return nodes[i - NODE_ARG_BASE]
        return self.values[i]


# Properties of the input nodes the program may read (`;; @props`), seeded like vmin/vmax: `ranges`, the
# RANGEs a node depends on that are not closed below it. Nodes the rules build have none.
PROPS = {"ranges": "ranges-of"}


# ======================================================================== program text

_EGG_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def egg_string(text: str) -> str:
    """The egglog string literal of `text`: every string the generators put in an egglog program goes
    through this.

    egglog's lexer knows the escapes \\\\ \\" \\n \\t and no others; any other unprintable character
    (NUL, CR, U+2028, ...) cannot be written safely (the program is also split into lines by
    str.splitlines), so it is refused with a ValueError.
    """
    out = []
    for c in text:
        if c in _EGG_ESCAPES:
            out.append(_EGG_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        else:
            raise ValueError(f"{text!r} holds {c!r}, which an egglog string cannot hold")
    return '"' + "".join(out) + '"'


# ======================================================================== the .egg file

@dataclass
class EggRule:
    name: str  # the rule's name in the rule file
    ruleset: str
    loc: str  # file:line
    egg_names: list[str]
    text: str


@dataclass
class EggFile:
    """A parsed `.egg` program: its sections and which egglog rule belongs to which rule."""

    name: str
    ops: list[Ops]
    sections: list[tuple[str, str, str]]  # (kind, filename for egglog, text)
    rules: list[EggRule] = field(default_factory=list)
    by_egg_name: dict[str, EggRule] = field(default_factory=dict)
    props: list[str] = field(default_factory=list)  # input-node properties the rules read (PROPS)


_MARK = re.compile(r"^;; @(\w+)(?: (.*))?$")


def read_egg(text: str, name: str = "") -> EggFile:
    """Split a generated program at its `;; @section` / `;; @rule` markers."""
    ops: list[Ops] = []
    props: list[str] = []
    sections: list[tuple[str, str, str]] = []
    rules: list[EggRule] = []
    cur_kind, cur_file, cur_lines = "header", f"{name}.egg", []
    version = None

    def flush() -> None:
        if cur_lines:
            sections.append((cur_kind, cur_file, "\n".join(cur_lines) + "\n"))

    for line in text.splitlines():
        m = _MARK.match(line)
        if not m:
            cur_lines.append(line)
            continue
        key, rest = m.group(1), m.group(2) or ""
        if key == "encoding":
            version = int(rest)
        elif key == "ops":
            ops = [Ops[o] for o in rest.split()]
        elif key == "props":
            props = [p for p in rest.split() if p in PROPS]
        elif key in ("section", "rule"):
            flush()
            cur_lines = []
            if key == "section":
                cur_kind, cur_file = rest.strip(), f"{name}.egg:{rest.strip()}"
            else:
                info = json.loads(rest)
                r = EggRule(info["name"], info.get("ruleset", ""), info["loc"], info["egg"], "")
                rules.append(r)
                cur_kind, cur_file = "rule", f"{info['loc']} (rule {info['name']})"
    flush()
    kinds = [k for k, _, _ in sections]
    if version != ENCODING_VERSION or any(k not in kinds for k in REQUIRED_SECTIONS):
        raise ValueError(f"{name}.egg was generated for egglog encoding v{version}, this rulec runs "
                         f"v{ENCODING_VERSION}; rebuild it with `rulec build --force`")
    it = iter(rules)
    for kind, _, body in sections:
        if kind == "rule":
            r = next(it)
            r.text = body
    egg = EggFile(name, ops, sections, rules, props=props)
    for r in rules:
        for n in r.egg_names:
            egg.by_egg_name[n] = r
    return egg


# ======================================================================== errors


def _is_panic(e: BaseException) -> bool:
    return type(e).__name__ == "PanicException"


_IN_FILE = re.compile(r"In \d+:\d+-\d+ of (.+?): ")


def _egg_message(e: BaseException) -> str:
    text = getattr(e, "context", None) or str(e)
    return " ".join(str(text).split())


# ======================================================================== encoding a graph

@dataclass
class _Encoded:
    nodes: list[UOp]
    ids: dict[UOp, int]
    rows: dict[str, list[str]]  # relation -> tsv lines
    opaque: set[int]
    keys: dict[int, tuple]  # node id -> (ctor, dtype key, payload, kids) for the encoded nodes; a kid is
    #                         ("n", node id) or ("l", list id)
    args: ArgTable
    lists: dict[tuple, int]  # source tuple (node ids) -> list id
    fconsts: dict[tuple, UOp]  # (dtype key, bits) -> the input's float constant


def is_safe_str(s: Any) -> bool:
    return isinstance(s, str) and not any(c in s for c in '\t\n\r"\\')


def is_i64(v: Any) -> bool:
    return type(v) is int and I64_MIN <= v <= I64_MAX


def _encode_node(u: UOp, ops: set[Ops], args: ArgTable) -> tuple | None:
    """(ctor, payload fields) for a node the e-graph can hold, else None (opaque); the tag is added after."""
    if u.op not in ops:
        return None
    dkey = dtype_key(u.dtype)
    if dkey is None:
        return None
    op, arg = u.op, u.arg
    if op is Ops.CONST:
        if u.src:
            return None
        kind = u.dtype.kind
        if kind == "bool":
            return ("CONST", int(arg)) if type(arg) is bool else None
        if kind in INT_KINDS:
            return ("CONST", arg) if is_i64(arg) else None
        if kind == "float" and type(arg) is float:
            return (FLOAT_CONST, float_bits(arg))
        return None
    if not variadic(op) and len(u.src) != arity(op):
        return None
    if op is Ops.DEFINE_VAR:
        if type(arg) is tuple and len(arg) == 3 and is_safe_str(arg[0]) and is_i64(arg[1]) and is_i64(arg[2]):
            return ("DEFINE_VAR",) + arg
        return None
    if op is Ops.RANGE:
        if type(arg) is tuple and len(arg) == 2 and is_i64(arg[0]) and is_safe_str(arg[1]):
            return ("RANGE",) + arg
        return None
    if op is Ops.SPECIAL:
        return ("SPECIAL", arg) if type(arg) is int and is_i64(arg) else None
    if op in PLAIN_OPS:
        return (op.name,) if arg is None else None
    return (op.name, args.ref(arg))


def _int_bound(v: Any) -> int | None:
    if type(v) is bool:
        return int(v)
    return v if is_i64(v) else None


def encode_graph(root: UOp, ops: set[Ops], props: tuple[str, ...] = ()) -> _Encoded:
    nodes = list(root.toposort())
    ids = {u: i for i, u in enumerate(nodes)}
    rows: dict[str, list[str]] = {}
    opaque: set[int] = set()
    keys: dict[int, tuple] = {}
    args = ArgTable()
    lists: dict[tuple, int] = {}
    fconsts: dict[tuple, UOp] = {}

    def list_id(items: tuple) -> int:
        """The id of a source list, its suffixes loaded first (shared between lists)."""
        lid = lists.get(items)
        if lid is None:
            if items:
                tail = list_id(items[1:])
                lid = lists[items] = len(lists)
                rows.setdefault("In_SCons", []).append(f"{lid}\t{items[0]}\t{tail}\n")
            else:
                lid = lists[items] = len(lists)
                rows.setdefault("In_SNil", []).append(f"{lid}\n")
        return lid

    for i, u in enumerate(nodes):
        enc = _encode_node(u, ops, args)
        if enc is not None:
            enc = enc + (args.ref(u.tag),)
        kids = [ids[s] for s in u.src]
        if enc is None:
            opaque.add(i)
            rows.setdefault("In_Opaque", []).append(f"{i}\t{u.op.name}\n")
            dkey = dtype_key(u.dtype)
            if dkey is not None:
                rows.setdefault("In_Dtype", []).append(f"{i}\t{dkey}\n")
        else:
            ctor, payload = enc[0], enc[1:]
            dkey = dtype_key(u.dtype)
            if ctor != FLOAT_CONST and variadic(u.op):
                kid_spec: tuple = (("l", list_id(tuple(kids))),)
            else:
                kid_spec = tuple(("n", k) for k in kids)
            if ctor == FLOAT_CONST:
                fconsts.setdefault((dkey, payload[0], payload[1]), u)
            fields = [str(i), dkey] + [str(k[1]) for k in kid_spec] + [str(p) for p in payload]
            rows.setdefault(f"In_{ctor}", []).append("\t".join(fields) + "\n")
            keys[i] = (ctor, dkey, payload, kid_spec)
        # seed the analysis with bounds.py's answer; sources come first in toposort order, so this
        # never recurses more than one level
        if getattr(u.dtype, "scalar", None) is not None and u.dtype.scalar.kind in INT_KINDS:
            try:
                lo, hi = _int_bound(u.vmin), _int_bound(u.vmax)
            except Exception:  # bounds of an exotic node: leave them to the analysis
                lo = hi = None
            if lo is not None and hi is not None:
                rows.setdefault("In_Bounds", []).append(f"{i}\t{lo}\t{hi}\n")
        if "ranges" in props and enc is not None:
            try:
                rs = tuple(ids[r] for r in u.ranges)
            except (KeyError, Exception):  # a range outside the graph, or a node without ranges
                rs = None
            if rs is not None:
                rows.setdefault("In_ranges", []).append(f"{i}\t{list_id(rs)}\n")
    return _Encoded(nodes, ids, rows, opaque, keys, args, lists, fconsts)


# ======================================================================== loaded programs, per thread

_local = threading.local()
_CACHE_SIZE = 8


def _session(path: Path, expected_sha256: str | None = None):
    """An EGraph with the program of `path` loaded (declarations and rules, no data), per thread.

    Loading a program costs about 80 ms (egglog compiles every rule); a run brackets its data
    with (push) ... (pop), about 8 ms, so the loaded program is reused. EGraphs are bound to
    the thread that made them, hence one cache per thread. The file is hashed on every call
    (well under a millisecond): a program that no longer matches the build it was loaded
    from is refused, and the cache is keyed by content, so an edited file is never served stale.
    """
    from rulec.runtime.engine.egglog_bindings import bindings

    b = bindings()

    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise ValueError(f"{path} changed since the rule set was loaded (sha256 mismatch); "
                         f"load it again or run `rulec build`")
    key = (str(path), digest)
    cache = getattr(_local, "sessions", None)
    if cache is None:
        cache = _local.sessions = {}
    hit = cache.pop(key, None)
    if hit is None:
        egg = read_egg(data.decode("utf-8"), path.stem)
        eg = b.EGraph()
        for kind, fname, body in egg.sections:
            if kind != "header":
                eg.run_program(*eg.parse_program(body, filename=fname))
        hit = (egg, eg)
    cache[key] = hit  # most recently used last
    while len(cache) > _CACHE_SIZE:
        cache.pop(next(iter(cache)))
    return hit


def _scratch_dir() -> str:
    """A folder for this thread's input files, reused by every run (creating one costs milliseconds)."""
    d = getattr(_local, "scratch", None)
    if d is None or not os.path.isdir(d):
        d = _local.scratch = tempfile.mkdtemp(prefix="rulec-egg-")
        import atexit

        atexit.register(shutil.rmtree, d, True)
    return d


def _forget(path: Path) -> None:
    cache = getattr(_local, "sessions", None) or {}
    for k in [k for k in cache if k[0] == str(path)]:
        del cache[k]


# ======================================================================== extraction

def _extract(eg, egg: EggFile, enc: _Encoded, root_ids: list[int]) -> list[UOp]:
    """Cheapest term per root, by ops.yaml cost; ties go to the input graph's own nodes."""
    fz = eg.freeze()
    funcs = fz.functions
    s_cache: dict = {}
    i_cache: dict = {}

    def s(v):
        r = s_cache.get(v)
        if r is None:
            r = s_cache[v] = eg.value_to_string(v)
        return r

    def i(v):
        r = i_cache.get(v)
        if r is None:
            r = i_cache[v] = eg.value_to_i64(v)
        return r

    ref = {i(r.inputs[0]): r.output for r in funcs["Ref"].rows}
    lref = {i(r.inputs[0]): r.output for r in funcs["LRef"].rows} if "LRef" in funcs else {}

    def kid_class(k: tuple):
        return ref[k[1]] if k[0] == "n" else lref[k[1]]

    # the input graph's e-nodes, by their key in the e-graph
    orig: set = set()
    for nid, (ctor, dname, payload, kids) in enc.keys.items():
        orig.add((ctor, dname, payload, tuple(kid_class(k) for k in kids)))
    # e-nodes: (class, ctor, dtype key, payload, child classes, cost); SNil/SCons build source lists
    enodes: list[tuple] = []
    ctors = [(op.name, ctor_fields(op), op_cost(op)) for op in egg.ops]
    ctors.append((FLOAT_CONST, FLOAT_CONST_FIELDS, op_cost(Ops.CONST)))
    for name, fields, cost in ctors:
        f = funcs.get(name)
        if f is None:
            continue
        n_src = sum(1 for x in fields if x in ("Node", "Srcs"))
        dec = fields[1 + n_src:]
        for r in f.rows:
            if r.subsumed:
                continue
            ins = r.inputs
            kids = tuple(ins[1:1 + n_src])
            payload = tuple(i(v) if how == "i64" else s(v) for how, v in zip(dec, ins[1 + n_src:]))
            enodes.append((r.output, name, s(ins[0]), payload, kids, cost))
    for name in ("SNil", "SCons"):
        f = funcs.get(name)
        for r in f.rows if f is not None else ():
            enodes.append((r.output, name, "", (), tuple(r.inputs), 0))
    f = funcs.get("Opaque")
    if f is not None:
        for r in f.rows:
            nid = i(r.inputs[0])
            kids = tuple(ref[enc.ids[c]] for c in enc.nodes[nid].src)
            enodes.append((r.output, "Opaque", "", (nid,), kids, OPAQUE_COST))
    neutral = ("Opaque", "SNil", "SCons")
    # Knuth's algorithm: an e-node is ready when all its child classes have a final cost
    parents: dict = {}
    pending: list[int] = []
    heap: list = []
    for idx, (cls, ctor, dname, payload, kids, cost) in enumerate(enodes):
        uk = set(kids)
        pending.append(len(uk))
        for k in uk:
            parents.setdefault(k, []).append(idx)
        if not uk:
            extra = 0 if ctor in neutral or (ctor, dname, payload, kids) in orig else 1
            heap.append(((cost, extra), idx))
    heapq.heapify(heap)
    best: dict = {}
    while heap:
        c, idx = heapq.heappop(heap)
        cls = enodes[idx][0]
        if cls in best:
            continue
        best[cls] = (c, idx)
        for pi in parents.get(cls, ()):
            pending[pi] -= 1
            if pending[pi] == 0:
                pcls, ctor, dname, payload, kids, cost = enodes[pi]
                if pcls in best:
                    continue
                extra = 0 if ctor in neutral or (ctor, dname, payload, kids) in orig else 1
                tot, ex = cost, extra
                for k in kids:
                    bc = best[k][0]
                    tot += bc[0]
                    ex += bc[1]
                heapq.heappush(heap, ((tot, ex), pi))
    # decode, sharing per e-class; a list class decodes to a tuple of nodes
    memo: dict = {}
    out = []
    for rid in root_ids:
        root = ref[rid]
        stack = [root]
        while stack:
            cls = stack[-1]
            if cls in memo:
                stack.pop()
                continue
            if cls not in best:
                raise EngineError(f"egglog engine: no extractable term for an e-class of {egg.name}")
            _, idx = best[cls]
            _, ctor, dname, payload, kids, _ = enodes[idx]
            todo = [k for k in kids if k not in memo]
            if todo:
                stack.extend(todo)
                continue
            if ctor == "SNil":
                memo[cls] = ()
            elif ctor == "SCons":
                memo[cls] = (memo[kids[0]],) + memo[kids[1]]
            else:
                src: tuple = ()
                for k in kids:
                    v = memo[k]
                    src += v if type(v) is tuple else (v,)
                if ctor == "Opaque":
                    orig_node = enc.nodes[payload[0]]
                    memo[cls] = orig_node if src == orig_node.src else orig_node.replace(src=src)
                else:
                    memo[cls] = _decode(ctor, dname, payload, src, enc)
            stack.pop()
        out.append(memo[root])
    return out


def _decode(ctor: str, dname: str, payload: tuple, src: tuple, enc: _Encoded) -> UOp:
    dt = dtype_of_key(dname)
    *payload, tag_ref = payload
    tag = enc.args.value(tag_ref, enc.nodes)
    if ctor == FLOAT_CONST:
        same = enc.fconsts.get((dname, payload[0], tag_ref))  # NaN != NaN: give back the input's own node
        return same if same is not None else UOp(Ops.CONST, dt, (), bits_float(payload[0]), tag)
    op = Ops[ctor]
    if op is Ops.CONST:
        c = UOp.const(dt, payload[0])
        return c if tag is None else c.rtag(tag)
    if op is Ops.DEFINE_VAR:
        return UOp(op, dt, (), tuple(payload), tag)
    if op is Ops.RANGE:
        return UOp(op, dt, src, tuple(payload), tag)
    if op is Ops.SPECIAL:
        return UOp(op, dt, src, payload[0], tag)
    if op in PLAIN_OPS:
        return UOp(op, dt, src, None, tag)
    return UOp(op, dt, src, enc.args.value(payload[0], enc.nodes), tag)


# ======================================================================== the engine

def _check_runnable(ruleset: Any, egg: EggFile, allow_partial: bool) -> None:
    infos = {r.name: r for r in ruleset.rules}
    calls = [r for r in ruleset.rules if r.kind == "call"]
    if calls and not allow_partial:
        where = ", ".join(f"{r.name} at {r.loc}" for r in calls)
        raise EngineError(f"rule set {ruleset.name} has Python callbacks (rules {where}); the egglog engine runs "
                          "pure rules only (allow_partial=True runs the pure rules alone)")
    skipped = [(n, why) for n, why in ruleset.egglog_skipped if why != "callback"]
    if skipped and not allow_partial:
        parts = []
        for n, why in skipped:
            info = infos.get(n)
            parts.append(f"{n}{' at ' + info.loc if info else ''}: {why}")
        raise EngineError(f"rule set {ruleset.name}: {len(skipped)} rule(s) cannot run on the egglog engine, "
                          f"so its result would differ from the python engine's:\n  " + "\n  ".join(parts) +
                          "\npass allow_partial=True to run the other rules anyway")


def _rule_for_error(egg: EggFile, msg: str) -> str:
    m = _IN_FILE.search(msg)
    if m:
        fname = m.group(1)
        for r in egg.rules:
            if fname == f"{r.loc} (rule {r.name})":
                return f" in rule {r.name} ({r.loc})"
    for r in egg.rules:
        for n in r.egg_names:
            if f'"{n}"' in msg:
                return f" in rule {r.name} ({r.loc})"
    return ""


def _check_options(graph: Any, iterations: Any, node_limit: Any, time_limit: Any, analysis_iterations: Any,
                   stats: Any) -> None:
    """Bad options fail by name, before egglog sees them (a negative count would silently run nothing)."""
    if not isinstance(graph, UOp):
        raise TypeError(f"the graph to rewrite must be a UOp, not {type(graph).__name__}")
    for name, v, least in (("iterations", iterations, 0), ("analysis_iterations", analysis_iterations, 1),
                           ("node_limit", node_limit, 1)):
        if v is None and name == "node_limit":
            continue
        if type(v) is not int or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, not {v!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not time_limit >= 0):  # `not >=`: NaN is refused too
        raise ValueError(f"time_limit must be a number of seconds >= 0 or None, not {time_limit!r}")
    if stats is not None and not isinstance(stats, dict):
        raise TypeError(f"stats must be a dict to fill or None, not {type(stats).__name__}")


def run_egglog(ruleset: Any, graph: UOp, *, iterations: int = 30, node_limit: int | None = None,
               time_limit: float | None = None, analysis_iterations: int = 30,
               commutativity: bool = False, allow_partial: bool = False, stats: dict | None = None) -> UOp:
    """Rewrite `graph` with the pure rules of `ruleset` by equality saturation; return the cheapest form.

    iterations           rounds of (analysis to a fixed point, then one pass of the rules)
    node_limit           stop once the e-graph holds this many e-nodes (default: 20k + 20 per input node)
    time_limit           stop after this many seconds of rule running (checked between rounds)
    analysis_iterations  bound on the analysis fixed point within one round
    commutativity        also run `a op b = b op a` for the commutative ops (the rules' own
                         commutative variants are always there)
    allow_partial        run even when some rules (or callbacks) could not be compiled to egglog
    stats                a dict to fill: matches per rule, rounds, e-nodes, stop reason, timings
    """
    from rulec.runtime.engine.egglog_bindings import bindings

    b = bindings()

    _check_options(graph, iterations, node_limit, time_limit, analysis_iterations, stats)
    t_start = time.perf_counter()
    path = Path(ruleset.egglog_path)
    try:
        egg, eg = _session(path, getattr(ruleset, "egglog_sha256", None))
    except (OSError, ValueError, KeyError) as e:
        raise EngineError(f"cannot read the egglog program of rule set {ruleset.name}: {e}") from None
    except Exception as e:
        raise EngineError(f"egglog rejected the program of rule set {ruleset.name}: {_egg_message(e)}") from None
    except BaseException as e:
        if _is_panic(e):
            raise EngineError(f"egglog panicked loading the program of rule set {ruleset.name}: "
                              f"{_egg_message(e)}") from None
        raise
    _check_runnable(ruleset, egg, allow_partial)

    S = b.PanicSpan()
    enc = encode_graph(graph, set(egg.ops), tuple(egg.props))
    if node_limit is None:
        node_limit = 20_000 + 20 * len(enc.nodes)
    timings: dict[str, float] = {"encode": time.perf_counter() - t_start}
    matches: dict[str, int] = {}
    rounds = 0
    stop = "iterations"
    tmp = _scratch_dir()
    pushed = False
    try:
        eg.run_program(b.Push(1))
        pushed = True
        t0 = time.perf_counter()
        cmds = []
        for rel, lines in enc.rows.items():
            p = os.path.join(tmp, rel + ".tsv")
            with open(p, "w") as f:
                f.writelines(lines)
            cmds.append(b.Input(S, rel, p))
        cmds.append(b.RunSchedule(b.Run(S, b.RunConfig("load", None))))
        eg.run_program(*cmds)
        timings["insert"] = time.perf_counter() - t0

        run_a = b.RunSchedule(b.Run(S, b.RunConfig("analysis", None)))
        run_p = b.RunSchedule(b.Run(S, b.RunConfig("prune", None)))
        # Plain `run`: egglog 13.2's back-off scheduler (`run-with`) matches subsumed e-nodes, which
        # undoes the `prune` ruleset; the e-graph is bounded by node_limit between rounds instead.
        run_r = b.RunSchedule(b.Sequence(S, [b.Run(S, b.RunConfig("rules", None))] +
                                         ([b.Run(S, b.RunConfig("comm", None))] if commutativity else [])))
        size_cmd = b.PrintSize(S, None)
        ctor_names = {o.name for o in egg.ops} | {"Opaque", FLOAT_CONST}

        def acc(rep) -> None:
            for n, k in rep.num_matches_per_rule.items():
                if k:
                    matches[n] = matches.get(n, 0) + k

        t0 = time.perf_counter()
        enodes = 0
        t_analysis = t_rules = 0.0
        while True:
            if rounds >= iterations:
                stop = "iterations"
                break
            rounds += 1
            ta = time.perf_counter()
            for _ in range(analysis_iterations):
                rep = eg.run_program(run_a)[0].report
                if not rep.updated:
                    break
            eg.run_program(run_p)
            tr = time.perf_counter()
            t_analysis += tr - ta
            rep = eg.run_program(run_r)[0].report
            t_rules += time.perf_counter() - tr
            acc(rep)
            if not rep.updated:
                stop = "saturated"
                break
            sizes = eg.run_program(size_cmd)[0].sizes
            enodes = sum(n for name, n in sizes if name in ctor_names)
            if enodes >= node_limit:
                stop = "node_limit"
                break
            if time_limit is not None and time.perf_counter() - t0 >= time_limit:
                stop = "time_limit"
                break
        timings["run"] = time.perf_counter() - t0
        timings["run:analysis"] = t_analysis
        timings["run:rules"] = t_rules
        t0 = time.perf_counter()
        (result,) = _extract(eg, egg, enc, [enc.ids[graph]])
        timings["extract"] = time.perf_counter() - t0
    except Exception as e:
        if isinstance(e, EngineError):
            raise
        msg = _egg_message(e)
        raise EngineError(f"egglog failed running rule set {ruleset.name}{_rule_for_error(egg, msg)}: {msg}") from None
    except BaseException as e:
        if _is_panic(e):
            msg = _egg_message(e)
            raise EngineError(f"egglog panicked running rule set {ruleset.name}{_rule_for_error(egg, msg)}: "
                              f"{msg}") from None
        raise
    finally:
        try:
            if pushed:
                eg.run_program(b.Pop(S, 1))
        except BaseException:  # the loaded program is in an unknown state: load it afresh next time
            _forget(path)

    per_rule: dict[str, int] = {}
    for n, k in matches.items():
        r = egg.by_egg_name.get(n)
        if r is not None:
            per_rule[r.name] = per_rule.get(r.name, 0) + k
    _record_trace(ruleset, per_rule)
    if stats is not None:
        stats.update({"matches": per_rule, "egglog_matches": matches, "rounds": rounds, "stop": stop,
                      "input_nodes": len(enc.nodes), "opaque_nodes": len(enc.opaque),
                      "enodes": enodes, "seconds": time.perf_counter() - t_start, "timings": timings})
    return result


def _record_trace(ruleset: Any, per_rule: dict[str, int]) -> None:
    from rulec.runtime.engine.trace import active_trace

    t = active_trace()
    if t is None:
        return
    for info in ruleset.rules:
        n = per_rule.get(info.name)
        if n:
            st = t.stat(info)
            st.tries += n
            st.hits += n


__all__ = ["run_egglog", "read_egg", "encodable", "encode_graph", "EGG_DTYPES", "CORE_OPS", "ENCODING_VERSION",
           "dtype_key", "dtype_of_key", "ctor_fields", "variadic", "ArgTable"]
