"""`rulec reduce PROG --until CMD`: shrink a tensor program to a small one that still fails CMD.

A candidate "still fails" when CMD exits with a non-zero status (and, with --match, its output matches).
PROG must fail, and the empty program must not (else CMD is not judging the candidate). The passes of
rulec/tools/reduce_edits.py run in turn, to a fixed point; each lists its edits on the current program and
tries them in chunks, halving the chunk size down to one edit (delta debugging), keeping any candidate that
still fails. Candidates are unparsed syntax trees, so each is valid Python; CMD runs through
rulec/tools/reduce_judge.py.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import time
from pathlib import Path
from typing import Callable

from rulec.tools.reduce_edits import PASSES, Edit, apply, count_statements, size_key
from rulec.tools.reduce_judge import Judge, Verdict


class Reducer:
    """The current smallest failing program, and the loop that tries to make it smaller."""

    def __init__(self, judge: Callable[[str], Verdict], text: str, filename: str, max_tries: int | None = None,
                 tries: Callable[[], int] = lambda: 0, on_step: Callable[[Reducer], None] = lambda r: None):
        self.judge, self.filename, self.max_tries, self.tries, self.on_step = judge, filename, max_tries, tries, on_step
        self.tree = ast.parse(text)
        self.text = text
        self.key = size_key(self.tree, text)
        self.seen: set[str] = {text}  # texts already judged (or invalid, or no smaller): never run twice
        self.pass_name = ""

    def exhausted(self) -> bool:
        return self.max_tries is not None and self.tries() >= self.max_tries

    def run(self) -> None:
        progress = True
        while progress and not self.exhausted():
            progress = False
            for name, edits in PASSES:
                self.pass_name = name
                progress |= self._run_pass(edits)
                if self.exhausted():
                    return

    def _run_pass(self, list_edits: Callable[[ast.Module], list[Edit]]) -> bool:
        """Delta debugging over the pass's edits: all at once, then halves, quarters, ... single edits. After a
        success the edits are listed again; the position stays, since what followed the chunk moved up."""
        edits = list_edits(self.tree)
        size, progress = len(edits), False
        while size >= 1:
            i = 0
            while i < len(edits):
                if self.exhausted():
                    return progress
                if self._try(edits[i:i + size]):
                    progress = True
                    edits = list_edits(self.tree)
                else:
                    i += size
            size = min(size // 2, len(edits))
        return progress

    def _try(self, edits: list[Edit]) -> bool:
        try:
            text = ast.unparse(apply(self.tree, edits))
        except (AttributeError, IndexError, TypeError, ValueError, RecursionError):
            return False  # edits of one chunk that do not fit together (a node another edit already replaced)
        text = text + "\n" if text else text
        if text in self.seen:
            return False
        self.seen.add(text)
        try:
            compile(text, self.filename, "exec")  # also catches `break` left outside a loop, and the like
        except (SyntaxError, ValueError):
            return False
        tree = ast.parse(text)
        key = size_key(tree, text)
        if key >= self.key:
            return False
        verdict = self.judge(text)
        self.on_step(self)
        if not verdict.fails:
            return False
        self.tree, self.text, self.key = tree, text, key
        return True


def cmd_reduce(args: argparse.Namespace) -> int:
    prog = Path(args.file)
    if not prog.is_file():
        return _error(f"{args.file}: no such file" if not prog.exists() else f"{args.file}: not a file")
    try:
        text = prog.read_text(encoding="utf-8")
        ast.parse(text, filename=str(prog))
    except UnicodeDecodeError:
        return _error(f"{args.file}: not UTF-8 text")
    except OSError as e:
        return _error(f"cannot read {args.file}: {e.strerror}")
    except SyntaxError as e:
        return _error(f"{args.file}:{e.lineno}: not valid Python: {e.msg}")
    except ValueError as e:  # null bytes
        return _error(f"{args.file}: not valid Python: {e}")
    if args.timeout <= 0:
        return _error(f"--timeout {args.timeout:g}: must be more than 0 seconds")
    if args.max_tries is not None and args.max_tries < 1:
        return _error(f"--max-tries {args.max_tries}: must be at least 1")
    try:
        match = re.compile(args.match, re.MULTILINE) if args.match is not None else None
    except re.error as e:
        return _error(f"--match {args.match!r}: not a regular expression: {e}")
    output = Path(args.output) if args.output else prog.with_suffix(".reduced.py")
    judge = Judge(args.until, prog, args.timeout, match)
    try:
        return _reduce(args, prog, text, output, judge)
    finally:
        judge.close()


def _reduce(args: argparse.Namespace, prog: Path, text: str, output: Path, judge: Judge) -> int:
    from rulec.tools.summary import console

    first = judge(text)
    if not first.fails:
        return _error(f"{prog.name} does not fail `{args.until}`: {_why_not(first, args)}; nothing to reduce")
    if judge("").fails:
        return _error(f"`{args.until}` fails on an empty program too, so nothing in {prog.name} is needed for the "
                      "failure: make CMD judge the candidate (`{}` or $RULEC_REDUCE_FILE), or name the failure "
                      "with --match REGEX")
    t0 = time.perf_counter()
    con = console(stderr=True)
    status = con.status(f"reducing {prog.name}") if con.is_terminal else None

    def show(r: Reducer) -> None:
        if status is not None:
            status.update(f"reducing {prog.name} · {r.pass_name} · {judge.tries} tries · "
                          f"{count_statements(r.tree)} statements, {len(r.text)} characters")

    reducer = Reducer(judge, text, prog.name, args.max_tries, lambda: judge.tries, show)
    reducer.seen.add("")  # judged above
    interrupted = False
    if status is not None:
        status.start()
    try:
        reducer.run()
    except KeyboardInterrupt:
        interrupted = True  # keep what was found so far
    finally:
        if status is not None:
            status.stop()
    try:
        output.write_text(reducer.text, encoding="utf-8")
    except OSError as e:
        return _error(f"cannot write {output}: {e.strerror}")
    before, after = count_statements(ast.parse(text)), count_statements(reducer.tree)
    note = "; interrupted" if interrupted else "; stopped at --max-tries" if reducer.exhausted() else ""
    print(f"rulec: reduced {prog} to {output}: {before} -> {after} statements, {len(text)} -> {len(reducer.text)} "
          f"characters, {judge.tries} tries, {time.perf_counter() - t0:.1f} s{note}", file=sys.stderr)
    return 130 if interrupted else 0


def _why_not(verdict: Verdict, args: argparse.Namespace) -> str:
    if verdict.timed_out:
        return f"it ran out of time (--timeout {args.timeout:g} s), and a try that times out does not fail"
    if verdict.status == 0:
        return "it exits 0"
    return f"it exits {verdict.status}, but its output does not match --match {args.match!r}"


def _error(message: str) -> int:
    print(f"rulec: error: {message}", file=sys.stderr)
    return 2


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    r = sub.add_parser("reduce", help="shrink a program to a minimal one that still fails a command",
                       description="Delta-debug PROG, a Python script using rulec.Tensor, down to a small program "
                                   "that still fails CMD: CMD exits non-zero on it (and, with --match, prints "
                                   "something matching REGEX).")
    r.add_argument("file", metavar="PROG", help="the script to reduce")
    r.add_argument("--until", metavar="CMD", required=True,
                   help="a shell command judging a candidate; `{}` in it is the candidate's path (else the path is "
                        "added at the end; it is also in $RULEC_REDUCE_FILE); non-zero exit: still fails")
    r.add_argument("-o", "--output", metavar="FILE", help="where to write the result (default: PROG.reduced.py)")
    r.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds per try (default 60); a try that runs out of time does not fail")
    r.add_argument("--max-tries", type=int, metavar="N", help="run CMD at most N times in all (the first two checks, on PROG and on an empty "
                        "program, always run)")
    r.add_argument("--match", metavar="REGEX",
                   help="a try fails only if CMD's output (stdout and stderr) also matches REGEX")
    r.set_defaults(func=cmd_reduce)
    return r
