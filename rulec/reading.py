"""Reading a rule file's text: only regular files, of a bounded size, as UTF-8.

A path on the command line or in a rules folder may be anything: `/dev/zero` never ends, a FIFO blocks
until someone writes to it, a huge file takes minutes to parse. Each is refused with a reason, and text
that is not UTF-8 is refused at the line and column of its first bad byte.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .diagnostics import Loc

# ~50x the largest shipped rule file; checking costs about 1 s and building 2 s per 200 KB of rules, so
# a file at the limit (some 17,000 rules) builds in about 10 s
MAX_SOURCE_BYTES = 1 << 20


class SourceError(Exception):
    """A file that can't be read as rule-file text; `loc` is its first bad byte, or 1:1 for the whole file."""

    def __init__(self, message: str, loc: Loc):
        super().__init__(message)
        self.loc = loc


def read_source(path: Path, shown: str | None = None) -> str:
    """The text of a rule file (universal newlines), or SourceError naming why not, at `shown`:1:1 or at
    the first bad byte."""
    shown = shown or str(path)
    whole = Loc(shown, 1, 1)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError("cannot read the file: not a regular file", whole)
        if st.st_size > MAX_SOURCE_BYTES:
            raise SourceError(f"the file has {st.st_size} bytes; a rule file may have at most {MAX_SOURCE_BYTES}",
                              whole)
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)  # the file may have grown since stat
    except OSError as e:
        raise SourceError(f"cannot read the file: {e.strerror or e}", whole) from None
    return decode_source(data, shown)


def decode_source(data: bytes, shown: str) -> str:
    """Rule-file bytes (from a file or standard input) as text, or SourceError at the first bad byte."""
    if len(data) > MAX_SOURCE_BYTES:
        raise SourceError(f"the file has more than {MAX_SOURCE_BYTES} bytes, the most a rule file may have",
                          Loc(shown, 1, 1))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[:e.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", errors="replace")) + 1
        raise SourceError(f"not UTF-8 text: byte 0x{data[e.start]:02x} ({e.reason})", Loc(shown, line, col)) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode reads it
