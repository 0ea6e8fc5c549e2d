"""`python -m rulec.compat SCRIPT.py [ARGS...]`: run a tinygrad script on rulec, as `python SCRIPT.py`
would run it on tinygrad (no summary tables: `rulec run` prints those)."""
from __future__ import annotations

import sys

from rulec.compat import tinygrad_layer
from rulec.tools.program import ProgramNotFound, run_program


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m rulec.compat SCRIPT.py [ARGS...]\n"
              "run a script written for tinygrad 0.14 with `tinygrad` served by rulec (docs/tinygrad.md)",
              file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    try:
        with tinygrad_layer():
            return run_program(args[0], args[1:]).status
    except ProgramNotFound as e:
        print(f"python -m rulec.compat: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
