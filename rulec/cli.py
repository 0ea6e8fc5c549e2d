"""The `rulec` command: build, check and show rule sets; run, trace and measure programs.

Exit status: 0 on success, 1 when a rule file has errors (or warnings with
--werror), 2 on bad usage, 130 when interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from . import __version__
from .diagnostics import CompileError, Diagnostic, printable


def _print_diagnostics(diags: list[Diagnostic], stream=None, texts: dict[str, str] | None = None) -> None:
    """Diagnostics, errors first, each with its source line (`texts`: files given as text, by name)."""
    stream = stream or sys.stderr
    lines = {name: text.splitlines(keepends=True) for name, text in (texts or {}).items()}
    order = {"error": 0, "warning": 1, "note": 2}
    for d in sorted(diags, key=lambda d: (order[d.severity], str(d.loc.file if d.loc else ""),
                                          d.loc.line if d.loc else 0, d.loc.col if d.loc else 0)):
        print(d.render(lines), file=stream)


def _summary(diags: list[Diagnostic]) -> str:
    e = sum(d.severity == "error" for d in diags)
    w = sum(d.severity == "warning" for d in diags)
    return f"{e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)}"


STDIN = "-"  # `rulec check -`: one rule file read from standard input, shown as <stdin>


def _check_paths(paths: list[str], stdin_ok: bool = False) -> list[str]:
    if STDIN in paths and not stdin_ok:
        raise SystemExit(_usage_error("'-' (standard input) can only be checked: rulec check -"))
    if paths.count(STDIN) > 1:
        raise SystemExit(_usage_error("'-' (standard input) can be given once"))
    missing = [p for p in paths if p != STDIN and not Path(p).exists()]
    if missing:
        raise SystemExit(_usage_error(f"no such file or directory: {', '.join(missing)}"))
    from rulec.runtime.engine.artifacts import rule_files

    empty = [p for p in paths if Path(p).is_dir() and not rule_files([p])]
    if empty:  # checking nothing would pass: more likely a wrong folder than an intent
        raise SystemExit(_usage_error(f"no rule files (*.yaml) in {', '.join(empty)}"))
    return paths


def _check_output(output: str | None) -> str | None:
    if output is not None and not output.strip():
        raise SystemExit(_usage_error("-o needs a folder name, not an empty string"))
    return output


def _usage_error(msg: str) -> int:
    print(f"rulec: error: {msg}", file=sys.stderr)
    return 2


def _build_folder_error(e: Exception) -> int:
    """A build folder that can't be written: one line, exit 1 (the rule files themselves were fine)."""
    print(f"rulec: error: {e}", file=sys.stderr)
    return 1


def cmd_check(args: argparse.Namespace) -> int:
    from .compiler import compile_project
    from .build import default_sources

    paths = _check_paths(args.paths, stdin_ok=True)
    texts = None
    if STDIN in paths:
        from .reading import MAX_SOURCE_BYTES, SourceError, decode_source

        paths = [p for p in paths if p != STDIN]
        try:
            texts = {"<stdin>": decode_source(sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1), "<stdin>")}
        except SourceError as e:
            bad = [Diagnostic("error", e.loc, str(e))]
            _print_diagnostics(bad)
            print(_summary(bad), file=sys.stderr)
            return 1
    elif not paths:
        paths = default_sources()
    try:
        project = compile_project(paths, texts=texts)
    except CompileError as e:
        _print_diagnostics(e.diagnostics, texts=texts)
        print(_summary(e.diagnostics), file=sys.stderr)
        return 1
    _print_diagnostics(project.diagnostics, texts=texts)
    n_rules = sum(len(rs.rules) for rs in project.rulesets.values())
    if not args.quiet:
        print(f"checked {len(project.files) + len(texts or {})} file(s), {len(project.rulesets)} rule set(s), {n_rules} rule(s): "
              f"{_summary(project.diagnostics)}", file=sys.stderr)
    return 1 if (args.werror and project.warnings) else 0


@contextlib.contextmanager
def _build_progress(wanted: bool):
    """A progress bar over the rule sets on a terminal (cleared when done); nothing when piped or quiet."""
    if not (wanted and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("building {task.description}"), BarColumn(), MofNCompleteColumn(),
                  transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("rule sets", total=None)

        def update(name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=name)

        yield update


def cmd_build(args: argparse.Namespace) -> int:
    from .build import BuildFolderError, build

    paths = _check_paths(args.paths) or None
    t0 = time.perf_counter()
    try:
        with _build_progress(not args.quiet) as progress:
            res = build(paths, _check_output(args.output), force=args.force, progress=progress)
    except CompileError as e:
        _print_diagnostics(e.diagnostics)
        print(_summary(e.diagnostics), file=sys.stderr)
        return 1
    except BuildFolderError as e:
        return _build_folder_error(e)
    _print_diagnostics(res.project.diagnostics)
    if not args.quiet:
        ms = (time.perf_counter() - t0) * 1e3
        print(f"built {len(res.built)} rule set(s), {len(res.reused)} up to date, into {res.out_dir} "
              f"({ms:.0f} ms)", file=sys.stderr)
    return 1 if (args.werror and res.project.warnings) else 0


def cmd_show(args: argparse.Namespace) -> int:
    from .build import BuildFolderError, build, default_build_dir
    from .loader import RuleSetNotFound, load

    paths = _check_paths(args.paths) or None
    try:
        res = build(paths, _check_output(args.output))
    except CompileError as e:
        _print_diagnostics(e.diagnostics)
        return 1
    except BuildFolderError as e:
        return _build_folder_error(e)
    if args.name not in res.project.rulesets:
        import difflib

        close = difflib.get_close_matches(args.name, list(res.project.rulesets), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        print(f"rulec: error: no rule set named '{args.name}'{hint}", file=sys.stderr)
        return 1
    rs = res.project.rulesets[args.name]
    sections = {s for s in ("rules", "python", "egglog") if getattr(args, s)} or {"rules", "python", "egglog"}
    out = sys.stdout
    if "rules" in sections:
        # a doc is free text and a file name may hold anything: neither may send escapes to the terminal
        print(f";; rule set {rs.name} ({printable(str(rs.loc))})", file=out)
        for line in rs.doc.splitlines():
            print(f";; {printable(line)}".rstrip(), file=out)
        for inc, loc in rs.include:
            print(f";; includes {inc} ({printable(str(loc))})", file=out)
        for r in rs.all_rules(res.project.rulesets, include_disabled=True):
            kind = ("disabled" if not r.enabled else f"call {r.call.module}:{r.call.function}" if r.call
                    else r.kind)
            print(f"{printable(str(r.loc))}: {r.ruleset}/{r.name} [{kind}]", file=out)
    out_dir = res.out_dir
    del load, RuleSetNotFound, default_build_dir
    if "python" in sections:
        print(f"\n;; ---- generated Python ({out_dir / (rs.name + '.py')})", file=out)
        print((out_dir / f"{rs.name}.py").read_text(), file=out)
    if "egglog" in sections:
        from .build import read_manifest

        entry = (read_manifest(out_dir) or {}).get("rulesets", {}).get(rs.name, {})
        if entry.get("egglog"):
            print(f"\n;; ---- generated egglog ({out_dir / entry['egglog']})", file=out)
            print((out_dir / entry["egglog"]).read_text(), file=out)
        else:
            print(f"\n;; ---- no egglog program: none of the rules of {rs.name} can run on egglog", file=out)
            for rule, reason in entry.get("egglog_skipped", []):
                print(f";;   {printable(rule)}: {printable(reason)}", file=out)
    return 0


def make_parser() -> argparse.ArgumentParser:
    from .build import egglog_version

    p = argparse.ArgumentParser(prog="rulec", description="Compile and inspect rulec rule files; run and trace programs.")
    p.add_argument("--version", action="version", version=f"rulec {__version__} (egglog {egglog_version()})")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("paths", nargs="*", metavar="PATH",
                        help="rule files or folders (default: the rules/ folder shipped with rulec)")
        sp.add_argument("-q", "--quiet", action="store_true", help="print diagnostics only")
        sp.add_argument("--werror", action="store_true", help="treat warnings as errors")

    b = sub.add_parser("build", help="compile rule files into a build folder")
    common(b)
    b.add_argument("-o", "--output", metavar="DIR", help="build folder (default: a per-source cache folder)")
    b.add_argument("--force", action="store_true", help="regenerate every rule set")
    b.set_defaults(func=cmd_build)

    c = sub.add_parser("check", help="parse and check rule files without writing anything",
                       epilog="A PATH of '-' reads one rule file from standard input (shown as <stdin>).")
    common(c)
    c.set_defaults(func=cmd_check)

    s = sub.add_parser("show", help="show a rule set: its rules, generated Python and egglog")
    s.add_argument("name", metavar="NAME", help="rule-set name")
    s.add_argument("paths", nargs="*", metavar="PATH", help="rule files or folders (default: rulec's rules/)")
    s.add_argument("-o", "--output", metavar="DIR", help="build folder")
    s.add_argument("--rules", action="store_true", help="only the rules and their locations")
    s.add_argument("--python", action="store_true", help="only the generated Python")
    s.add_argument("--egglog", action="store_true", help="only the generated egglog")
    s.set_defaults(func=cmd_show)
    from .tools import diff, explain, reduce, run, stats, trace_cmd, viz_cmd, why

    tools = {"run": run.add_parser(sub), "trace": trace_cmd.add_parser(sub), "stats": stats.add_parser(sub),
             "explain": explain.add_parser(sub), "why": why.add_parser(sub), "viz": viz_cmd.add_parser(sub),
             "diff": diff.add_parser(sub), "reduce": reduce.add_parser(sub)}
    p.set_defaults(commands={"build": b, "check": c, "show": s, **tools})
    return p


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Options may come between paths (`rulec show NAME -o DIR FILE`): argparse allows that only when a
    command's own parser reads its arguments intermixed, which a parser with subcommands cannot."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = parser.get_default("commands").get(argv[0]) if argv else None
    if command is None:
        return parser.parse_args(argv)
    args = command.parse_intermixed_args(argv[1:])
    args.command = argv[0]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as e:  # usage errors, --help, --version: a status like every other outcome
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except SystemExit as e:
        return int(e.code or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `rulec show X | head` closes the pipe early; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
