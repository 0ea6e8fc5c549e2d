"""Model state, as tinygrad 0.14's `nn.state`: the Tensors of a model by name, loading them back, and
files in the safetensors format (through the `safetensors` package's numpy API: the format is not
written by hand here)."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.tensor.tensor import Tensor

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "tar_extract"]


def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
    """Every Tensor reachable from `obj` through attributes, lists, tuples and dicts, by dotted name
    (`layers.0.weight`), in the order they are found."""
    out: dict[str, Tensor] = OrderedDict()
    stack: list[tuple[str, Any]] = [(prefix, obj)]
    seen: set[int] = set()
    while stack:
        name, o = stack.pop(0)
        if isinstance(o, tensor_type):
            out[name.rstrip(".")] = o
            continue
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, (list, tuple)):
            stack[0:0] = [(f"{name}{i}.", v) for i, v in enumerate(o)]
        elif isinstance(o, dict):
            stack[0:0] = [(f"{name}{k}.", v) for k, v in o.items()]
        elif hasattr(o, "__dict__"):
            stack[0:0] = [(f"{name}{k}.", v) for k, v in vars(o).items()]
    return out


def get_parameters(obj: Any) -> list[Tensor]:
    """The Tensors of `obj` (each once), as get_state_dict finds them."""
    out, seen = [], set()
    for t in get_state_dict(obj).values():
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = False,
                    consume: bool = False, realize: bool = True) -> list[Tensor]:
    """Set every Tensor of `model` to the one of the same name in `state_dict` (shapes must match, a 0-d
    and a 1-element tensor fitting each other, else a ValueError in tinygrad's words; the values move to
    the model tensor's device). With `strict`, a name missing from `state_dict` is an
    error; a name of `state_dict` that the model lacks is ignored. `consume` removes each loaded entry from
    `state_dict`; `verbose` prints each name. Returns the tensors set."""
    mine = get_state_dict(model)
    missing = [k for k in mine if k not in state_dict]
    if strict and missing:
        raise KeyError(f"load_state_dict: the state dict has no {', '.join(missing[:5])}"
                       + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""))
    done = []
    for name, t in mine.items():
        if name not in state_dict:
            continue
        v = state_dict[name]
        if tuple(v.shape) != tuple(t.shape):
            # one value as a 0-d tensor or as a 1-element vector is the same state (num_batches_tracked is
            # saved either way)
            if {tuple(v.shape), tuple(t.shape)} != {(), (1,)}:
                raise ValueError(f"Shape mismatch in layer `{name}`: Expected shape {tuple(t.shape)}, but found "
                                 f"{tuple(v.shape)} in state dict.")
            v = v.reshape(t.shape)
        if verbose:
            print(f"loading {name} {tuple(t.shape)}")
        t.uop = (v.to(t.device) if t.device is not None and v.device != t.device else v).cast(t.dtype).uop
        done.append(t)
        if consume:
            del state_dict[name]
    if realize and done:
        Tensor.realize(*done)
    return done


def safe_save(tensors: dict[str, Tensor], fn: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` to `fn` in the safetensors format."""
    from safetensors.numpy import save_file

    arrays = {}
    for name, t in tensors.items():
        if t.dtype.name == "bfloat16":
            raise TypeError(f"safe_save: {name} is bfloat16, which the safetensors numpy API cannot write; "
                            "cast it to float32 first")
        arrays[name] = np.require(t.numpy(), None, "C")  # not ascontiguousarray: it makes a 0-d tensor 1-d
    save_file(arrays, str(fn), metadata=metadata)


def safe_load(fn: str | Path) -> dict[str, Tensor]:
    """The tensors of a safetensors file, by name, as realized Tensors on the default device."""
    from safetensors.numpy import load_file

    return {name: Tensor(a).realize() for name, a in load_file(str(fn)).items()}


def tar_extract(t: Tensor) -> dict[str, Tensor]:
    """The regular files of the tar archive held in the uint8 Tensor `t` (a `Tensor.from_url` of a .tar, say),
    by member name, each a uint8 Tensor of its bytes."""
    import io
    import tarfile

    if t.dtype != dtypes.uint8 or t.ndim != 1:
        raise ValueError(f"tar_extract takes a 1-d uint8 Tensor of an archive's bytes, not {t.dtype.name} of shape {t.shape}")
    with tarfile.open(fileobj=io.BytesIO(t.numpy().tobytes())) as archive:
        return {m.name: Tensor(archive.extractfile(m).read()) for m in archive.getmembers() if m.isfile()}
