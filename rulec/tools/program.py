"""Run a user's Python script as `python FILE.py ARGS...` would, inside rulec's tools.

The script runs as `__main__` with its own folder first on `sys.path` and `sys.argv` set to its
arguments. If it raises, the traceback is printed as Python prints it, from the script's own frames
(rulec's runner frames are left out), and the status is 1; `sys.exit(n)` gives status n.

A script written for tinygrad 0.14 runs as written: while it runs, `import tinygrad` is served by rulec
(rulec.compat, docs/tinygrad.md), unless `tinygrad=False` (`rulec run --no-tinygrad`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def add_program_arguments(parser: argparse.ArgumentParser, metavar: str = "PROG", traces: bool = False) -> None:
    """The script to run and its own arguments, as every tool takes them (`traces`: a trace file too)."""
    what = "the script to run, or a trace file (.json) to read" if traces else "the script to run"
    parser.add_argument("file", metavar=metavar, help=what)
    parser.add_argument("args", nargs="*", metavar="ARGS",
                        help="arguments for the script (after `--` when they start with -)")


class ProgramNotFound(Exception):
    """The script to run does not exist or is not a file."""


@dataclass
class ProgramResult:
    status: int  # 0: ran to the end; otherwise the exit status the script would have had
    error: BaseException | None = None


def run_program(path: str | Path, argv: list[str] | None = None, tinygrad: bool = True) -> ProgramResult:
    """Run the script at `path` to its end; never raises for the script's own errors. `tinygrad`: serve
    `import tinygrad` from rulec while it runs."""
    from rulec.compat import tinygrad_layer

    script = Path(path)
    if not script.is_file():
        raise ProgramNotFound(f"{path}: no such file" if not script.exists() else f"{path}: not a file")
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *(argv or [])]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        with tinygrad_layer(tinygrad):
            runpy.run_path(str(script), run_name="__main__")
        return ProgramResult(0)
    except SystemExit as e:
        return ProgramResult(_exit_status(e.code), e if e.code not in (None, 0) else None)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the script's error: shown as Python would show it
        _print_script_traceback(e, script)
        return ProgramResult(1, e)
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints the message and exits 1
    return 1


def _print_script_traceback(e: BaseException, script: Path) -> None:
    tb = e.__traceback__
    target = os.path.realpath(script)
    # drop the frames of this runner and of runpy: the traceback starts where the script's code does
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb if tb is not None else e.__traceback__, file=sys.stderr)


def run_traced(path: str | Path, argv: list[str] | None = None, keep_events: bool = True,
               script_stdout_to_stderr: bool = True, tinygrad: bool = True) -> tuple[ProgramResult, Any]:
    """Run a script with a trace recording; the script's own prints go to stderr, so that what the tool
    prints on stdout (a trace, a table, JSON) stays clean."""
    from rulec.runtime.engine.trace import tracing

    with tracing(keep_events=keep_events) as trace:
        if script_stdout_to_stderr:
            with contextlib.redirect_stdout(sys.stderr):
                result = run_program(path, argv, tinygrad)
        else:
            result = run_program(path, argv, tinygrad)
    return result, trace
