"""The on-disk cache of compiled kernels, shared by every process of a user.

Entries are named by a sha256 of everything that decides their bytes, so an entry is never stale: a new
compiler, flag or source is a new name. Writes are atomic (a temp file in the same folder, then os.replace),
so a reader in another process sees a whole file or none.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rulec.runtime.resources import cache_root


def kernel_cache_dir() -> Path:
    """`$RULEC_CACHE_DIR/kernels`, else `$XDG_CACHE_HOME/rulec/kernels`, else `~/.cache/rulec/kernels`."""
    return cache_root() / "kernels"


def cache_key(language: str, compiler: str, flags: list[str] | tuple[str, ...], source: str) -> str:
    """sha256 of (language, compiler identity and version, flags, source); NUL-separated so parts can't blur."""
    h = hashlib.sha256()
    for part in (language, compiler, "\x1f".join(flags), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def entry_path(key: str, suffix: str) -> Path:
    return kernel_cache_dir() / f"{key}{suffix}"


@contextmanager
def atomic_output(final: Path) -> Iterator[Path]:
    """Yields a temp path beside `final`; on a clean exit it is renamed onto `final`, else removed."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_text(key: str, suffix: str) -> str | None:
    path = entry_path(key, suffix)
    try:
        return path.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def write_text(key: str, suffix: str, text: str) -> None:
    with atomic_output(entry_path(key, suffix)) as tmp:
        tmp.write_text(text)
