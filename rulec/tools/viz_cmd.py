"""`rulec viz PROG [ARGS...] -o out.html`: the explorer, one self-contained HTML file (no CDN, no server;
it opens from file:// and can be kept as a CI artifact)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rulec.tools.program import ProgramNotFound, add_program_arguments, run_traced


def cmd_viz(args: argparse.Namespace) -> int:
    from rulec.tools.viz.page import build_page

    try:
        result, trace = run_traced(args.file, args.args)
    except ProgramNotFound as e:
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    if result.status != 0:
        return result.status
    page = build_page(trace, program=args.file, max_nodes=args.max_nodes)
    out = Path(args.output)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as e:
        print(f"rulec: error: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 1
    steps = sum(1 for _ in trace.events)
    print(f"wrote {out} ({len(page) // 1024} KiB: {len(trace.stages)} stages, {steps} steps, "
          f"{len(trace.kernels)} kernels)", file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from rulec.tools.viz.page import MAX_NODES

    v = sub.add_parser("viz", help="write the explorer: one self-contained HTML page over a program's trace",
                       description="Run PROG with tracing on and write an HTML explorer of every stage and step.")
    v.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the page to write")
    v.add_argument("--max-nodes", type=int, default=MAX_NODES, metavar="N",
                   help=f"nodes drawn at once (default {MAX_NODES}); larger graphs show the part around the focus")
    add_program_arguments(v)
    v.set_defaults(func=cmd_viz)
    return v
