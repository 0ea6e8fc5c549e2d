"""`rulec run --emit DIR`: every kernel the script ran, rendered in all four languages.

DIR/<kernel>.c, .cl, .cu and .metal for each distinct kernel, and DIR/schedule.txt listing the kernels
in the order they ran (with their devices), one per line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


EXTENSIONS = {"c": ".c", "opencl": ".cl", "cuda": ".cu", "metal": ".metal"}


class KernelEmitter:
    """A realize watcher that writes the kernels of every realize into one folder."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.names: dict[Any, str] = {}  # kernel AST -> file stem
        self.order: list[str] = []
        self.files = 0

    def before_realize(self, tensors: tuple[Any, ...]) -> None:
        pass

    def after_realize(self, tensors: tuple[Any, ...], items: list[Any]) -> None:
        from rulec.backends.render import kernel_name

        for item in items:
            if item.is_copy:
                self.order.append(f"COPY {item.device}")
                continue
            stem = self.names.get(item.ast)
            if stem is None:
                stem = self._unique(kernel_name(item.ast))
                self.names[item.ast] = stem
                for language, ext in EXTENSIONS.items():
                    (self.folder / f"{stem}{ext}").write_text(item.render(language))
                    self.files += 1
            self.order.append(f"{stem} {item.device}")
        (self.folder / "schedule.txt").write_text("".join(line + "\n" for line in self.order))

    def _unique(self, name: str) -> str:
        taken = set(self.names.values())
        if name not in taken:
            return name
        n = 2
        while f"{name}_{n}" in taken:
            n += 1
        return f"{name}_{n}"
