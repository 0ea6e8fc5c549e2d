"""Render a lowered kernel as source text, from a backend's folder of Jinja templates and YAML.

A backend is a folder `backends/<name>/` with `backend.yaml` (types, literals, one expression template per
op, loop and thread-id statements; `extends:` another backend and overrides what differs) and the kernel
skeleton template it names. Adding a backend is a new folder; `Backend.load(path)` takes any folder, so a
project may keep its own.

Every value is given a name once (common subexpressions are shared: the IR is hash-consed); constants,
loop variables, thread ids and parameters are written in place.
"""
from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any

import jinja2

from rulec.backends.parallel import parallel_loop
from rulec.backends.vectorize import Pack, VectorSpec, plan_vectors
from rulec.runtime.codegen.linearize import Step
from rulec.runtime.codegen.lower import LoweredKernel, lower
from rulec.runtime.ir.dtype import DType, dtypes
from rulec.runtime.ir.ops import GroupOp, Ops
from rulec.runtime.ir.uop import UOp
from rulec.runtime.resources import read_yaml_data

BACKENDS_DIR = Path(__file__).resolve().parent
LANGUAGES = ("c", "opencl", "cuda", "metal")


class RenderError(ValueError):
    """The kernel uses something this backend cannot express (a dtype, an op); names both."""


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


class Backend:
    """One target language: its YAML spec, merged with the backends it extends, and its templates."""

    def __init__(self, name: str, spec: dict[str, Any], folders: list[Path]):
        self.name, self.spec = name, spec
        env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(f) for f in folders]),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                 autoescape=False)  # noqa: S701 - the output is source code, not HTML
        self.env = env
        self.kernel_template = env.get_template(spec["template"])
        self._compiled: dict[str, jinja2.Template] = {}

    @classmethod
    def load(cls, folder: str | Path) -> Backend:
        """The backend described by `folder`/backend.yaml (extending others by name, from backends/)."""
        folder = Path(folder)
        spec = read_yaml_data(folder / "backend.yaml")
        folders = [folder]
        while spec.get("extends"):
            base_dir = BACKENDS_DIR / spec["extends"]
            base = read_yaml_data(base_dir / "backend.yaml")
            spec = _merge(base, {**spec, "extends": base.get("extends")})
            folders.append(base_dir)
        return cls(folder.name, spec, folders)

    @property
    def target(self) -> str:
        return self.spec["target"]

    def template(self, text: str) -> jinja2.Template:
        t = self._compiled.get(text)
        if t is None:
            t = self._compiled[text] = self.env.from_string(text)
        return t

    def fill(self, text: str, **kw: Any) -> str:
        return self.template(text).render(**kw)

    def type_name(self, dt: DType, storage: bool = False) -> str:
        dt = dt.scalar
        table = self.spec["types"]
        if storage and dt.name in self.spec.get("storage_types", {}):
            return self.spec["storage_types"][dt.name]
        if dt.name not in table or table[dt.name] is None:
            raise RenderError(f"{self.name}: the dtype {dt.name} has no type in this language")
        return table[dt.name]

    def by_dtype(self, entry: Any, dt: DType) -> str | None:
        """An entry that is one template, or a mapping by dtype name, then kind, then `default`."""
        if not isinstance(entry, dict):
            return entry
        dt = dt.scalar
        for key in (dt.name, dt.kind, "default"):
            if key in entry:
                return entry[key]
        return None

    def literal(self, dt: DType, v: Any) -> str:
        dt = dt.scalar
        if dt.kind == "float":
            v = float(v)
            if not math.isfinite(v):
                specials = self.spec["special_floats"].get(dt.name)
                if specials is None:
                    raise RenderError(f"{self.name}: no infinity or NaN of {dt.name}")
                return _wrap_negative(specials[2] if math.isnan(v) else specials[0 if v > 0 else 1])
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
        elif dt.kind == "bool":
            text = bool(v)
        else:
            v = int(v)
            if dt.kind in ("int", "index") and v == -(1 << (8 * dt.itemsize - 1)) and dt.itemsize >= 4:
                # the most negative value has no literal in C: (-MAX - 1)
                return f"({self.literal(dt, v + 1)}-1)"
            text = str(v)
        tmpl = self.by_dtype(self.spec["literals"], dt)
        self.type_name(dt)  # a dtype this language lacks is an error here too
        return _wrap_negative(self.fill(tmpl, v=text))

    @functools.cached_property
    def vectors(self) -> VectorSpec | None:
        """The tile lanes this backend computes as vectors (backends/vectorize.py), or None."""
        entry = self.spec.get("vectors")
        return VectorSpec.from_yaml(entry) if entry else None

    def render(self, kernel: LoweredKernel, name: str, vectors: bool | None = None) -> str:
        """`kernel`'s source; `vectors=False` keeps every lane of a tile scalar (the same results; None: as
        $RULEC_VECTORS says, on unless it is 0)."""
        return _Renderer(self, kernel, name, vectors_wanted(vectors)).run()


def _wrap_negative(text: str) -> str:
    """A literal with a leading minus in parentheses: `a - -1` and `-(-INFINITY)` must not read as `a--1`."""
    return f"({text})" if text.startswith("-") else text


@functools.cache
def backend(name: str) -> Backend:
    """rulec's own backend `name` (one of LANGUAGES)."""
    if name not in LANGUAGES:
        raise ValueError(f"unknown language {name!r}: expected one of {', '.join(LANGUAGES)}")
    return Backend.load(BACKENDS_DIR / name)


def vectors_wanted(vectors: bool | None = None) -> bool:
    """`vectors`, or where it is None $RULEC_VECTORS (read per call): a tile's lanes as vectors unless it is 0."""
    return os.environ.get("RULEC_VECTORS", "1") != "0" if vectors is None else vectors


def render(ast: UOp, language: str, name: str | None = None, vectors: bool | None = None) -> str:
    """The complete source of the kernel `ast` in `language` ("c", "opencl", "cuda" or "metal")."""
    b = backend(language)
    return b.render(lower(ast, b.target), name or kernel_name(ast), vectors)


def kernel_name(ast: UOp) -> str:
    """A readable name: r_ (with a reduce) or E_, then the loop sizes. Each kernel is its own translation
    unit, so names need not be unique; they must be stable (the compile cache is keyed by the source)."""
    nodes = ast.toposort()
    sizes = [str(u.src[0].arg) if u.src[0].op is Ops.CONST else "n" for u in nodes if u.op is Ops.RANGE]
    prefix = "r" if any(u.op is Ops.REDUCE for u in nodes) else "E"
    return f"{prefix}_{'_'.join(sizes) or '1'}"


_INLINE = {Ops.CONST, Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.AFTER, Ops.INDEX, Ops.END, Ops.NOOP}


class _Renderer:
    def __init__(self, b: Backend, k: LoweredKernel, name: str, vectors: bool = True):
        self.b, self.k, self.name = b, k, name
        self.names: dict[UOp, str] = {}
        self.gates: dict[UOp, str] = {}  # INDEX -> its gate's text
        self.lines: list[str] = []
        self.depth = 1
        self.counts: dict[str, int] = {}
        self.rounded_used: set[str] = set()  # dtypes whose rounding helper the kernel calls
        self.parallel = parallel_loop(k) if b.spec.get("parallel") else None
        self.plan = plan_vectors(k.steps, b.vectors) if vectors and b.vectors is not None else None
        self.vec: dict[tuple[UOp, ...], str] = {}  # a pack's lanes (a reg pack's: its accumulators) -> its name
        self.vector_types: dict[str, str] = {}  # name -> typedefs
        self.declared: dict[UOp, str] = {}  # DEFINE_REG -> the variable that holds it

    def rounded(self, dt: DType, text: str) -> str:
        """`text` (a value of `dt`) through the dtype's rounding template, where the backend has one."""
        tmpl = self.b.spec.get("rounded", {}).get(dt.scalar.name)
        if tmpl is None:
            return text
        self.rounded_used.add(dt.scalar.name)
        return self.b.fill(tmpl, a=text)

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def run(self) -> str:
        params = []
        for g in self.k.globals:
            self.names[g] = f"data{g.arg}"
            params.append({"name": f"data{g.arg}", "type": self.b.type_name(g.dtype.base, storage=True),
                           "buffer": True, "index": g.arg, "written": g.arg in self.k.outputs})
        for v in self.k.variables:
            self.names[v] = v.arg[0]
            params.append({"name": v.arg[0], "type": self.b.type_name(v.dtype), "buffer": False,
                           "index": len(params), "written": False})
        for item in (self.plan.order if self.plan is not None else range(len(self.k.steps))):
            if isinstance(item, Pack):
                self.vector(item)
            else:
                self.step(self.k.steps[item])
        uses = {self.b.type_name(u.dtype) for u in self.k.lowered.toposort() if u.dtype.scalar.name != "void"
                 and self.b.spec["types"].get(u.dtype.scalar.name)}
        prelude = self.b.spec.get("prelude", "") + "".join(self.b.spec["rounding_helpers"][n]
                                                           for n in sorted(self.rounded_used)) \
            + "".join(self.vector_types.values())
        return self.b.kernel_template.render(name=self.name, params=params, body=self.lines, uses=uses,
                                             prelude=prelude, global_size=self.k.global_size)

    def text(self, u: UOp) -> str:
        return self.names[u]

    def step(self, s: Step) -> None:
        u = s.uop
        if s.kind == "open":
            if self.parallel is not None and u is self.parallel.loop:
                private = ", ".join(dict.fromkeys(self.declared[a] for a in self.parallel.private))
                self.emit(self.b.fill(self.b.spec["parallel"], private=private))
            r = self.names[u] = self.fresh("r")
            self.emit(self.b.fill(self.b.spec["loop"], t=self.b.type_name(u.dtype), r=r, n=self.text(u.src[0])))
            self.depth += 1
            return
        if s.kind == "close":
            self.depth -= 1
            self.emit("}")
            return
        op = u.op
        if op is Ops.CONST:
            self.names[u] = self.rounded(u.dtype, self.b.literal(u.dtype, u.arg))
        elif op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.END, Ops.NOOP):
            pass
        elif op is Ops.AFTER:
            self.names[u] = self.text(u.src[0])
        elif op is Ops.SPECIAL:
            self.special(u)
        elif op is Ops.DEFINE_REG:
            name = self.names[u] = self.declared[u] = self.fresh("acc")
            self.emit(f"{self.b.type_name(u.dtype)} {name};")
        elif op is Ops.INDEX:
            self.names[u] = f"{self.text(u.src[0])}[{self.text(u.src[1])}]"
            if len(u.src) > 2:
                self.gates[u] = self.text(u.src[2])
        elif op is Ops.LOAD:
            self.load(u)
        elif op is Ops.STORE:
            self.store(u)
        elif op in GroupOp.ALU or op in (Ops.CAST, Ops.BITCAST):
            self.alu(u)
        else:
            raise RenderError(f"{self.b.name}: cannot render {op.name} in kernel {self.name}")

    def vector_type(self, element: str, itemsize: int, lanes: int) -> str:
        spec = self.b.spec["vectors"]
        name = self.b.fill(spec["name"], t=element.replace(" ", "_"), n=lanes)
        if name not in self.vector_types:
            self.vector_types[name] = self.b.fill(spec["typedef"], t=element, name=name, bytes=itemsize * lanes,
                                                  align=itemsize)
        return name

    def lanes_type(self, lanes: tuple[UOp, ...], itemsize: int) -> str:
        """The vector type of `lanes`: of their dtype, or for bools a mask of `itemsize`-byte lanes."""
        dt = lanes[0].dtype
        if dt.scalar.name == "bool":
            return self.vector_type(self.b.spec["vectors"]["masks"][str(itemsize)], itemsize, len(lanes))
        return self.vector_type(self.b.type_name(dt), dt.scalar.itemsize, len(lanes))

    def vector(self, p: Pack) -> None:
        """One pack of lanes (backends/vectorize.py) as one vector statement."""
        spec = self.b.spec["vectors"]
        value_lanes = tuple(u.src[1] for u in p.lanes) if p.kind in ("store", "reg_store", "scatter") else p.lanes
        u = value_lanes[0]
        # the lane width: a comparison's mask is as wide as what it compares
        size = (u.src[0].dtype if u.dtype.scalar.name == "bool" else u.dtype).scalar.itemsize
        vt = self.lanes_type(value_lanes, size)
        if p.kind == "reg":
            name = self.vec[p.lanes] = self.fresh("acc")
            self.declared.update((r, name) for r in p.lanes)
            self.names.update((r, name) for r in p.lanes)  # an AFTER names its register; only packs read it
            self.emit(f"{vt} {name};")
            return
        if p.kind == "store":
            value = self.operand(p.operands[0], size)
            self.emit(self.b.fill(spec["store"], name=vt, ref=self.text(p.lanes[0].src[0]), v=value))
            return
        if p.kind == "scatter":
            value = self.operand(p.operands[0], size)
            if not value.isidentifier():
                tmp = self.fresh("alu")
                self.emit(f"{vt} {tmp} = {value};")
                value = tmp
            for k, st in enumerate(p.lanes):
                self.emit(f"{self.text(st.src[0])} = {value}[{k}];")
            return
        if p.kind == "reg_store":
            self.emit(f"{self.vec[p.group]} = {self.operand(p.operands[0], size)};")
            return
        if p.kind == "load":
            value, prefix = self.b.fill(spec["load"], name=vt, ref=self.text(p.lanes[0].src[0])), "val"
        elif p.kind == "reg_load":
            value, prefix = self.vec[p.group], "val"
        else:
            ops = [self.operand(o, size) for o in p.operands]
            mt = self.vector_type(spec["masks"][str(size)], size, len(p.lanes))
            value = self.b.fill(spec["ops"][u.op.name], a=ops[0], b=ops[1] if len(ops) > 1 else "",
                                c=ops[2] if len(ops) > 2 else "", vt=vt, mt=mt)
            prefix = "alu"
        name = self.vec[p.lanes] = self.fresh(prefix)
        self.emit(f"{vt} {name} = {value};")
        mask = u.dtype.scalar.name == "bool"
        for k, m in enumerate(p.lanes):
            lane = f"{name}[{k}]"
            self.names[m] = self.b.fill(spec["extract_mask"], a=lane) if mask else lane

    def operand(self, lanes: tuple[UOp, ...], itemsize: int) -> str:
        """A vector of `lanes`: their pack's, or the lanes' scalars put together (bools as a mask of
        `itemsize`-byte lanes)."""
        # a mask serves a select of lanes as wide as what it compared; another is built again from its lanes
        if lanes in self.vec and (lanes[0].dtype.scalar.name != "bool"
                                  or lanes[0].src[0].dtype.scalar.itemsize == itemsize):
            return self.vec[lanes]
        spec = self.b.spec["vectors"]
        texts = [self.text(u) for u in lanes]
        if lanes[0].dtype.scalar.name == "bool":
            texts = [self.b.fill(spec["mask_lane"], a=t) for t in texts]
        return self.b.fill(spec["build"], name=self.lanes_type(lanes, itemsize), lanes=", ".join(texts))

    def special(self, u: UOp) -> None:
        spec = self.b.spec.get("thread_id")
        if spec is None:
            raise RenderError(f"{self.b.name}: thread ids on a target without them (kernel {self.name})")
        name = self.names[u] = f"g{u.arg}"
        self.emit(self.b.fill(spec, name=name, dim=u.arg, axis="xyz"[u.arg], n=self.text(u.src[0]),
                              t=self.b.type_name(dtypes.index)))

    def load(self, u: UOp) -> None:
        src = u.src[0]
        name = self.names[u] = self.fresh("val")
        t = self.b.type_name(u.dtype)
        if src.op is Ops.INDEX and src in self.gates:
            value = f"({self.gates[src]}?{self._read(u, src)}:{self.b.literal(u.dtype, 0)})"
        elif src.op is Ops.INDEX:
            value = self._read(u, src)
        else:  # a register
            value = self.text(src)
        self.emit(f"{t} {name} = {self.rounded(u.dtype, value)};")

    def _read(self, u: UOp, idx: UOp) -> str:
        # a buffer whose storage type differs (OpenCL's bool as uchar) is converted when read
        if self.b.type_name(u.dtype, storage=True) != self.b.type_name(u.dtype):
            return f"(({self.b.type_name(u.dtype)}){self.text(idx)})"
        return self.text(idx)

    def store(self, u: UOp) -> None:
        target, value = u.src[0], u.src[1]
        text = self.text(value)
        if target.op is Ops.INDEX:
            dt = value.dtype
            if self.b.type_name(dt, storage=True) != self.b.type_name(dt):
                text = f"(({self.b.type_name(dt, storage=True)}){text})"
            line = f"{self.text(target)} = {text};"
            self.emit(f"if ({self.gates[target]}) {line}" if target in self.gates else line)
        else:
            self.emit(f"{self.text(target)} = {text};")

    def alu(self, u: UOp) -> None:
        entry = self.b.spec["ops"].get(u.op.name)
        # comparisons and casts depend on their sources' dtype, the rest on their own
        key_dt = u.src[0].dtype if u.op in GroupOp.Comparison else u.dtype
        if u.op is Ops.WHERE:
            key_dt = u.dtype
        tmpl = self.b.by_dtype(entry, key_dt) if entry is not None else None
        if tmpl is None:
            raise RenderError(f"{self.b.name}: no template for {u.op.name} of {key_dt.scalar.name} "
                              f"(kernel {self.name})")
        ops = [self.text(s) for s in u.src]
        divisor = u.src[1] if len(u.src) > 1 else None
        safe = divisor is not None and divisor.op is Ops.CONST and divisor.arg not in (0, -1)
        t = self.b.type_name(u.dtype)
        if u.op is Ops.BITCAST and self._widened(u.dtype) != self._widened(u.src[0].dtype):
            raise RenderError(f"{self.b.name}: cannot bitcast {u.src[0].dtype.scalar.name} to "
                              f"{u.dtype.scalar.name}: {self.b.name} computes one of them in a wider type "
                              f"(kernel {self.name})")
        value = self.b.fill(tmpl, a=ops[0], b=ops[1] if len(ops) > 1 else "", c=ops[2] if len(ops) > 2 else "",
                            t=t, st=self.b.type_name(u.src[0].dtype), ut=self._unsigned(u.dtype),
                            bits=8 * u.dtype.scalar.itemsize, safe_divisor=safe)
        name = self.names[u] = self.fresh("alu")
        self.emit(f"{t} {name} = {self.rounded(u.dtype, value)};")

    def _unsigned(self, dt: DType) -> str:
        """The unsigned type of `dt`'s width, which signed arithmetic wraps through (`ut` in a template)."""
        u = {4: dtypes.uint32, 8: dtypes.uint64}.get(dt.scalar.itemsize) if dt.scalar.kind == "int" else None
        return self.b.type_name(u) if u is not None else self.b.type_name(dt)

    def _widened(self, dt: DType) -> bool:
        return self.b.spec.get("rounded", {}).get(dt.scalar.name) is not None
