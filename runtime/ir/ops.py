"""The `Ops` enumeration and op groups, read from rules/ops.yaml.

The op table is data: this module only turns it into Python objects, so an op
or group added to the YAML file is usable from rule files and Python at once.
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

from rulec.runtime.resources import rules_dir


@dataclass(frozen=True)
class OpInfo:
    arity: int | None
    commutative: bool
    cost: int
    result_dtype: str  # how a rule-built node gets its dtype: "src0", "src1", "bool", "index" or "void"


def _load_table() -> tuple[dict, dict]:
    """The table as plain data. Parsed YAML is kept in the user cache as JSON, named by the file's sha256,
    so a program runs without a YAML parser until ops.yaml is edited."""
    text = (rules_dir() / "ops.yaml").read_bytes()
    from rulec.runtime.resources import cache_root, prebuilt_dir

    name, digest = op_table_cache_name(text), hashlib.sha256(text).hexdigest()
    cached = cache_root() / name
    for path in (prebuilt_dir() / name, cached):  # a wheel ships it; a checkout makes it on first use
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if (isinstance(data, dict) and data.get("source_sha256") == digest and isinstance(data.get("ops"), dict)
                    and isinstance(data.get("groups"), dict)):
                return data["ops"], data["groups"]
        except (OSError, ValueError):
            pass
    import yaml

    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    _write_cache(cached, _cache_text(digest, data["ops"], data["groups"]))
    return data["ops"], data["groups"]


def _cache_text(digest: str, ops: dict, groups: dict) -> str:
    return json.dumps({"source_sha256": digest, "ops": ops, "groups": groups})


def op_table_cache_name(text: bytes) -> str:
    return f"ops-{hashlib.sha256(text).hexdigest()[:32]}.json"


def write_op_table_cache(folder) -> None:
    """The parsed op table as JSON in `folder`, named by the table's hash (the wheel's prebuilt build)."""
    text = (rules_dir() / "ops.yaml").read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    _write_cache(folder / op_table_cache_name(text), _cache_text(digest, _OPS_RAW, _GROUPS_RAW))


def _write_cache(path, text: str) -> None:
    """Best effort, atomically (a reader never sees half a file); an unwritable cache only costs a parse."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".rulec-tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass


_OPS_RAW, _GROUPS_RAW = _load_table()

# an IntEnum hashes like an int, in C: ops are hashed on every dispatch and every node creation
Ops = enum.IntEnum("Ops", list(_OPS_RAW), module=__name__)
Ops.__doc__ = "Every op of the IR, in the order of rules/ops.yaml."
# enum's default repr is noisy in graph dumps
Ops.__repr__ = lambda self: f"Ops.{self.name}"  # type: ignore[method-assign]
Ops.__str__ = lambda self: f"Ops.{self.name}"  # type: ignore[method-assign]



class OpAttrs:
    """Every member of `Ops` as a plain class attribute, for hot code (the generated matchers import it as
    `Ops`): on Python 3.11, `Ops.ADD` goes through the enum metaclass's `__getattr__` hook and costs some
    250 ns; a plain class attribute, 50."""


for _op in Ops:
    setattr(OpAttrs, _op.name, _op)

OP_INFO: dict[Ops, OpInfo] = {
    Ops[name]: OpInfo(spec.get("arity"), bool(spec.get("commutative", False)), int(spec.get("cost", 1)),
                    spec.get("dtype", "src0"))
    for name, spec in _OPS_RAW.items()
}


def _resolve_groups(raw: dict[str, list[str]]) -> dict[str, frozenset]:
    out: dict[str, frozenset] = {"All": frozenset(Ops),
                                 "Commutative": frozenset(op for op, i in OP_INFO.items() if i.commutative)}

    def resolve(name: str, stack: tuple[str, ...]) -> frozenset:
        if name in out:
            return out[name]
        if name in stack:
            raise ValueError(f"rules/ops.yaml: group cycle through {' -> '.join(stack + (name,))}")
        members: set = set()
        for item in raw[name]:
            if item in raw or item in out:
                members |= resolve(item, stack + (name,))
            elif item in Ops.__members__:
                members.add(Ops[item])
            else:
                raise ValueError(f"rules/ops.yaml: group {name} names unknown op or group {item}")
        out[name] = frozenset(members)
        return out[name]

    for g in raw:
        resolve(g, ())
    return out


GROUPS: dict[str, frozenset] = _resolve_groups(_GROUPS_RAW)


class GroupOp:
    """Op groups as attributes: `GroupOp.ALU`, `GroupOp.Movement`, ..."""


for _name, _members in GROUPS.items():
    setattr(GroupOp, _name, _members)
