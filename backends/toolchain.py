"""Finding a compiler and naming it for cache keys: its resolved path plus what `--version` prints."""
from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache


def which(program: str) -> str | None:
    """The resolved path of `program` (a name on PATH or a path), or None."""
    found = shutil.which(program)
    return os.path.realpath(found) if found else None


@lru_cache(maxsize=None)
def _version(path: str, mtime_ns: int, flag: str) -> str:
    try:
        res = subprocess.run([path, flag], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return (res.stdout or res.stderr).strip()


def identity(path: str, flag: str = "--version") -> str:
    """`path` and its version text: a new compiler at the same path is a new cache key (mtime keys the memo)."""
    return f"{path}\n{_version(path, os.stat(path).st_mtime_ns, flag)}"
