"""The two errors of the kernel runners: a kernel that does not compile, and a device that cannot run here."""
from __future__ import annotations


def numbered(source: str) -> str:
    """`source` with right-aligned line numbers (`  12 | ...`), as compile errors show it."""
    lines = source.splitlines() or [""]
    width = max(4, len(str(len(lines))))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


class KernelCompileError(RuntimeError):
    """A kernel source that its language's compiler (or checker) rejected."""

    def __init__(self, name: str, language: str, source: str, log: str, command: str = "") -> None:
        self.name, self.language, self.source, self.log, self.command = name, language, source, log, command
        how = f" with `{command}`" if command else ""
        body = log.strip() or "(the compiler printed nothing)"
        super().__init__(f"{language} kernel {name!r} failed to compile{how}:\n{body}\n"
                         f"source of {name!r}:\n{numbered(source)}")


class DeviceUnavailable(RuntimeError):
    """A device asked to run a kernel on a machine that cannot: says which device, why, and what still works."""

    def __init__(self, device: str, reason: str, still: str = "") -> None:
        self.device, self.reason, self.still = device, reason, still
        super().__init__(f"{device}: {reason}" + (f"; {still}" if still else ""))
