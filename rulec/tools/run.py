"""`rulec run FILE.py [--check] [--emit DIR] [--no-tinygrad] [-- ARGS...]`: run a script that uses `rulec.Tensor`,
then summarize what rulec did.

A script written for tinygrad 0.14 runs unchanged: `import tinygrad` is served by rulec while it runs
(rulec.compat, docs/tinygrad.md); --no-tinygrad leaves `tinygrad` to the real package.

The script's own output goes to stdout as usual; the summary tables go to stderr. With --check every
realized output is compared with a float64 numpy evaluation (rulec/tools/oracle.py) and a mismatch makes
the status 1, naming the output and its largest difference. --emit DIR writes every kernel in the four
languages (rulec/tools/emit.py). A script that raises shows its traceback and exits 1, as under `python`.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any


from rulec.tools.program import add_program_arguments

RUN_DEVICES = ("CPU", "CL", "PYTHON")  # and CUDA, where a GPU driver is


def _not_runnable(backend: str) -> str | None:
    """Why `rulec run` cannot run kernels on `backend` here (None: it can)."""
    if backend in RUN_DEVICES:
        return None
    if backend == "CUDA":
        from rulec.backends.cuda import runner

        return None if runner.driver_present() else "CUDA runs only where a GPU driver is (no libcuda here)"
    return f"`rulec run` runs on {', '.join(RUN_DEVICES)} and CUDA"


def cmd_run(args: argparse.Namespace) -> int:
    from rulec.runtime.device import Device
    from rulec.tools.summary import console as summary_console

    console = summary_console(stderr=True)
    previous_device = Device.DEFAULT
    try:
        return _run(args, console)
    finally:
        Device.DEFAULT = previous_device  # run in-process (tests, notebooks): leave the default as it was


def _run(args: argparse.Namespace, console: Any) -> int:
    from rulec.runtime.device import Device, backend_of, canonical
    from rulec.runtime.engine import trace as tracing
    from rulec.runtime.tensor import realize
    from rulec.tools.emit import KernelEmitter
    from rulec.tools.oracle import Float64Check
    from rulec.tools.program import ProgramNotFound, run_program
    from rulec.tools.summary import LiveCount, print_summary

    if args.device is not None:
        device = canonical(args.device)
        why = _not_runnable(backend_of(device))
        if why is not None:
            console.print(f"rulec: error: --device {args.device}: {why}; {device} kernels can be rendered with --emit")
            return 2
        Device.DEFAULT = device
    watchers: list = []
    check = Float64Check(args.file) if args.check else None
    if check is not None:
        watchers.append(check)
    if args.emit is not None:
        watchers.append(KernelEmitter(args.emit))
    realize.WATCHERS.extend(watchers)
    t0 = time.perf_counter()
    try:
        with tracing.tracing(keep_events=False) as trace, LiveCount(console, f"running {args.file}", trace) as live:
            realize.WATCHERS.append(live)
            try:
                result = run_program(args.file, args.args, tinygrad=not args.no_tinygrad)
            finally:
                realize.WATCHERS.remove(live)
    except ProgramNotFound as e:
        console.print(f"rulec: error: {e}")
        return 2
    finally:
        for w in watchers:
            realize.WATCHERS.remove(w)
    wall = time.perf_counter() - t0
    sys.stdout.flush()
    if not args.quiet:
        print_summary(console, trace, wall, check.results if check is not None else None)
    if args.emit is not None:
        emitter = watchers[-1]
        console.print(f"wrote {emitter.files} kernel sources ({len(emitter.names)} kernels x 4 languages) "
                      f"to {args.emit}")
    if result.status != 0:
        return result.status
    if check is not None:
        if check.failures:
            for f in check.failures:
                print(f"rulec: error: check failed for {f.label}, shape {f.shape} {f.dtype}: "
                      f"largest difference {f.max_diff:.6g}; {f.detail}", file=sys.stderr)
            return 1
        if not check.results:
            console.print("rulec: warning: --check: the script realized no tensors, so nothing was checked")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    r = sub.add_parser("run", help="run a Python script that uses rulec.Tensor and summarize what rulec did",
                       description="Run FILE.py (with ARGS as its sys.argv) and print a summary: each stage with "
                                   "its rule hits and time, the kernels with their compile and run times.")
    r.add_argument("--device", metavar="DEV", help=f"device of new tensors: {', '.join(RUN_DEVICES)}, CUDA "
                                                   "(default: $DEV, else CPU)")
    r.add_argument("--check", action="store_true",
                   help="compare every realized output with a float64 numpy evaluation; exit 1 on a mismatch")
    r.add_argument("--emit", metavar="DIR", help="write every kernel in C, OpenCL, CUDA and Metal into DIR")
    r.add_argument("-q", "--quiet", action="store_true", help="no summary tables (errors only)")
    r.add_argument("--no-tinygrad", action="store_true",
                   help="leave `import tinygrad` to the real tinygrad (by default rulec serves it: docs/tinygrad.md)")
    add_program_arguments(r, "FILE.py")
    r.set_defaults(func=cmd_run)
    return r
