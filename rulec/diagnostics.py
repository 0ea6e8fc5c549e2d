"""Compiler diagnostics: `file:line:col: error: message`, the source line, and a caret."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Loc:
    """A position in a rule file; line and col are 1-based."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def shifted(self, cols: int) -> Loc:
        return Loc(self.file, self.line, self.col + cols)


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" | "warning" | "note"
    loc: Loc | None
    message: str
    length: int = 1

    def render(self, sources: dict[str, list[str]] | None = None) -> str:
        where = f"{printable(str(self.loc))}: " if self.loc else ""
        text = f"{where}{self.severity}: {printable(self.message)}"
        if self.loc is None:
            return text
        lines = (sources or {}).get(self.loc.file) or _read_lines(self.loc.file)
        if 1 <= self.loc.line <= len(lines):
            src, col = _excerpt(lines[self.loc.line - 1].rstrip("\n"), self.loc.col)
            caret = " " * (col - 1) + "^" + "~" * max(0, min(self.length, len(src) - col + 1) - 1)
            text += f"\n  {self.loc.line:>4} | {src}\n       | {caret}"
        return text


def printable(text: str) -> str:
    """`text` safe to print to a terminal: a character that is not printable (an escape sequence, a bell, a
    newline in a file name, a bidi override) is shown as its Python escape. Messages quote rule-file text."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


EXCERPT_WIDTH = 200
EXCERPT_READ_BYTES = 2 << 20  # more than a rule file may have (rulec/reading.py)


def _excerpt(line: str, col: int) -> tuple[str, int]:
    """The part of a source line to show, and the caret's column in it.

    One character in, one character out, so the caret stays under its token: a tab becomes a space and
    any other unprintable character (a terminal escape in a hostile file) a replacement mark. A long line
    is cut to a window around the column, with '...' where text was left out.
    """
    shown = "".join(" " if c == "\t" else c if c.isprintable() else "\ufffd" for c in line)
    if len(shown) <= EXCERPT_WIDTH:
        return shown, col
    start = max(0, min(col - 1 - EXCERPT_WIDTH // 2, len(shown) - EXCERPT_WIDTH))
    window = shown[start:start + EXCERPT_WIDTH]
    head = "..." if start > 0 else ""
    tail = "..." if start + EXCERPT_WIDTH < len(shown) else ""
    return head + window + tail, col - start + len(head)


def _read_lines(path: str) -> list[str]:
    p = Path(path)
    try:  # only a regular file: a diagnostic may name a FIFO or a device; bad bytes show as marks
        if not p.is_file():
            return []
        with open(p, "rb") as f:  # a file too large to compile is shown by its start, not read whole
            return f.read(EXCERPT_READ_BYTES).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


class CompileError(Exception):
    """One or more errors in rule files; str() is the rendered diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


@dataclass
class Reporter:
    """Collects diagnostics during one compiler run."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def error(self, loc: Loc | None, message: str, length: int = 1) -> None:
        self.diagnostics.append(Diagnostic("error", loc, message, length))

    def warning(self, loc: Loc | None, message: str, length: int = 1) -> None:
        self.diagnostics.append(Diagnostic("warning", loc, message, length))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise CompileError(self.errors)
