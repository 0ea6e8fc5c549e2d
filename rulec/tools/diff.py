"""`rulec diff OLD NEW PROG...`: two revisions of the rule files compared rule by rule, over programs.

OLD and NEW are each a folder shaped like rulec's `rules/` or a git revision of the current repository
(its `rules/` folder at that revision). Each revision runs the programs in its own subprocess
(`rulec.tools.diff_worker`, with RULEC_RULES_DIR set); the report compares what they recorded: rules only
in one revision, rules whose hit counts changed, kernels per program, and the kernels whose C code changed.

Exit status, as Unix `diff`: 0 no difference, 1 differences, 2 trouble (bad usage, an unusable revision,
a program that failed under either revision).
"""
from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "rulec-diff"
STDERR_LINES = 20  # of a failed worker's stderr, shown with the error


class DiffError(Exception):
    """Trouble: one line for `rulec: error:`, and what the worker printed before failing."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


@dataclass
class Revision:
    label: str  # as given on the command line
    folder: Path  # its rules folder


def _is_rules_folder(folder: Path) -> bool:
    from rulec.runtime.codegen.lower import PIPELINES

    return ((folder / "ops.yaml").is_file() and (folder / "schedule" / "pipeline.yaml").is_file()
            and all((folder / "codegen" / f).is_file() for f in PIPELINES.values()))


def _git(args: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, **kw)


def _git_commit(rev: str) -> str | None:
    """The commit `rev` names in the current folder's repository; None when it names none (or no git)."""
    try:
        r = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], text=True)
    except OSError:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _extract_revision(label: str, commit: str) -> Path:
    """The repository's `rules/` at `commit`, extracted once into the user cache (named by the commit, so a
    later diff reuses it and its build)."""
    from rulec.runtime.resources import cache_root

    dest = cache_root() / "revisions" / commit
    if _is_rules_folder(dest / "rules"):
        return dest / "rules"
    top = _git(["rev-parse", "--show-toplevel"], text=True).stdout.strip()
    r = _git(["archive", "--format=tar", commit, "rules"], cwd=top or None)
    if r.returncode != 0:
        raise DiffError(f"{label}: revision {commit[:12]} has no rules/ folder")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}.", dir=dest.parent))
        with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):  # refuses links and paths out of the folder
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
    except (OSError, tarfile.TarError) as e:
        raise DiffError(f"{label}: cannot extract its rules/ into {dest.parent}: {e}") from None
    try:
        os.replace(tmp, dest)  # atomic: a half-extracted revision is never seen
    except OSError:  # another diff extracted it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    if not _is_rules_folder(dest / "rules"):
        raise DiffError(f"{label}: rules/ at revision {commit[:12]} lacks ops.yaml, schedule/pipeline.yaml or the "
                        f"codegen pipelines")
    return dest / "rules"


def resolve(label: str) -> Revision:
    """A command-line OLD or NEW: a rules folder, else a git revision."""
    path = Path(label)
    if path.is_dir():
        if not _is_rules_folder(path):
            raise DiffError(f"{label}: not a rules folder (needs ops.yaml, schedule/pipeline.yaml and "
                            f"codegen/*.pipeline.yaml)")
        return Revision(label, path.resolve())
    commit = _git_commit(label)
    if commit is None:
        raise DiffError(f"{label}: neither a rules folder nor a git revision of the current repository")
    return Revision(label, _extract_revision(label, commit))


# ------------------------------------------------------------------ running the revisions

def run_revisions(revs: list[Revision], programs: list[str]) -> list[dict[str, Any]]:
    """Each revision's worker document; the workers run at once. Their stderr (the programs' own output
    too) goes to files, so a chatty program never blocks on a full pipe."""
    with tempfile.TemporaryDirectory(prefix="rulec-diff-") as tmp:
        procs = []
        try:
            for k, rev in enumerate(revs):
                env = dict(os.environ, RULEC_RULES_DIR=str(rev.folder))
                env.pop("RULEC_TRACE", None)  # the worker traces itself; an inherited trace would print or write
                out, err = Path(tmp) / f"{k}.json", Path(tmp) / f"{k}.err"
                cmd = [sys.executable, "-m", "rulec.tools.diff_worker", "--out", str(out), "--", *programs]
                with open(err, "wb") as err_file:
                    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=err_file)
                procs.append((rev, out, err, proc))
            for *_, proc in procs:
                proc.wait()
        finally:  # interrupted: no worker outlives the command
            for *_, proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        docs, failures = [], []
        for rev, out, err, proc in procs:
            text = err.read_text(encoding="utf-8", errors="replace")
            if proc.returncode == 0:
                docs.append(json.loads(out.read_text(encoding="utf-8")))
            elif proc.returncode == 1 and out.is_file():
                run = json.loads(out.read_text(encoding="utf-8"))["programs"][-1]
                failures.append(DiffError(f"{run['program']} failed under {rev.label} (status {run['status']})",
                                          text))
            else:
                lines = text.strip().splitlines()
                last = lines[-1] if lines else f"the worker exited with status {proc.returncode}"
                failures.append(DiffError(f"{rev.label}: {last.removeprefix('rulec: error: ')}",
                                          "\n".join(lines[:-1])))
        if failures:
            raise failures[0]
        return docs


# ------------------------------------------------------------------ comparing

def _loc(rule: dict[str, Any]) -> str:
    return f"{rule['file']}:{rule['line']}"


def compare(old: dict[str, Any], new: dict[str, Any], context: int = 3,
            labels: tuple[str, str] = ("OLD", "NEW")) -> dict[str, Any]:
    """The comparison of two worker documents (JSON-ready)."""
    o_rules = {r["id"]: r for r in old["rules"]}
    n_rules = {r["id"]: r for r in new["rules"]}
    brief = lambda r: {"id": r["id"], "loc": _loc(r), "hits": r["hits"]}  # noqa: E731
    only_old = [brief(o_rules[k]) for k in sorted(o_rules.keys() - n_rules.keys())]
    only_new = [brief(n_rules[k]) for k in sorted(n_rules.keys() - o_rules.keys())]
    changed = [{"id": k, "loc": _loc(n_rules[k]), "old": o_rules[k]["hits"], "new": n_rules[k]["hits"],
                "change": n_rules[k]["hits"] - o_rules[k]["hits"]}
               for k in o_rules.keys() & n_rules.keys() if o_rules[k]["hits"] != n_rules[k]["hits"]]
    changed.sort(key=lambda c: (-abs(c["change"]), c["id"]))
    o_st = {(s["pipeline"], s["name"]): s for s in old["stages"]}
    n_st = {(s["pipeline"], s["name"]): s for s in new["stages"]}
    stages = []
    for key in list(o_st) + [k for k in n_st if k not in o_st]:
        a, b = o_st.get(key, {}), n_st.get(key, {})
        stages.append({"pipeline": key[0], "stage": key[1], "old_hits": a.get("hits", 0),
                       "new_hits": b.get("hits", 0), "old_runs": a.get("runs", 0), "new_runs": b.get("runs", 0),
                       "old_seconds": a.get("seconds", 0.0), "new_seconds": b.get("seconds", 0.0)})
    programs, code = [], []
    for po, pn in zip(old["programs"], new["programs"]):
        ko, kn = po["kernels"], pn["kernels"]
        programs.append({"program": po["program"], "old_kernels": len(ko), "new_kernels": len(kn)})
        code.extend(_kernel_diffs(po["program"], ko, kn, context))
    kernels = sum(p["new_kernels"] for p in programs)
    different = bool(only_old or only_new or changed or code
                     or any(p["old_kernels"] != p["new_kernels"] for p in programs))
    return {"format": FORMAT, "version": 1, "different": different,
            "old": {"label": labels[0], "rules_dir": old["rules_dir"]},
            "new": {"label": labels[1], "rules_dir": new["rules_dir"]},
            "rules": {"old": len(o_rules), "new": len(n_rules), "only_old": only_old, "only_new": only_new,
                      "changed": changed},
            "stages": stages, "programs": programs, "kernels": kernels, "code": code}


def _blocks(a: list[Any], b: list[Any]) -> list[tuple[str, range, range]]:
    """difflib's alignment of two lists, as (tag, indexes into a, indexes into b)."""
    return [(tag, range(i1, i2), range(j1, j2))
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]


def _pairs(ra: range, rb: range) -> list[tuple[int | None, int | None]]:
    """In order; the longer side's extras are paired with nothing."""
    n = max(len(ra), len(rb))
    return [(ra[d] if d < len(ra) else None, rb[d] if d < len(rb) else None) for d in range(n)]


def _kernel_diffs(program: str, ko: list[dict], kn: list[dict], context: int) -> list[dict[str, Any]]:
    """The kernels whose code differs. The schedules are aligned by source, then each changed run by kernel
    name, so a kernel added or removed shows as that, not as every later kernel changed."""
    pairs: list[tuple[int | None, int | None]] = []
    for tag, ra, rb in _blocks([k["source"] for k in ko], [k["source"] for k in kn]):
        if tag == "equal":
            continue
        for _, sa, sb in _blocks([ko[i]["name"] for i in ra], [kn[j]["name"] for j in rb]):
            pairs.extend(_pairs(ra[sa.start:sa.stop], rb[sb.start:sb.stop]))
    out = []
    for i, j in pairs:
        a, b = (ko[i] if i is not None else None), (kn[j] if j is not None else None)
        if a and b and a["source"] == b["source"]:
            continue
        head = lambda k, n: f"{program} kernel #{n + 1} {k['name']}" if k else "/dev/null"  # noqa: E731
        lines = list(difflib.unified_diff((a["source"] if a else "").splitlines(),
                                          (b["source"] if b else "").splitlines(),
                                          f"OLD {head(a, i)}", f"NEW {head(b, j)}", n=context, lineterm=""))
        out.append({"program": program, "old_index": i, "new_index": j, "old_name": a["name"] if a else None,
                    "new_name": b["name"] if b else None, "diff": lines})
    return out


# ------------------------------------------------------------------ the report

def print_report(cmp: dict[str, Any], max_lines: int = 40, out: Any = None) -> None:
    out = out or sys.stdout
    w = lambda s="": print(s, file=out)  # noqa: E731
    old, new = cmp["old"]["label"], cmp["new"]["label"]
    r = cmp["rules"]
    w(f"OLD {old} ({r['old']} rules)  NEW {new} ({r['new']} rules), {len(cmp['programs'])} program(s)")
    for key, side in (("only_old", "OLD"), ("only_new", "NEW")):
        if r[key]:
            w(f"\nrules only in {side} ({len(r[key])}):")
            for x in r[key]:
                w(f"  {x['id']}  {x['loc']}  hits {x['hits']}")
    if r["changed"]:
        w(f"\nrule hits changed ({len(r['changed'])}), largest change first:")
        width = max(len(c["id"]) for c in r["changed"])
        for c in r["changed"]:
            w(f"  {c['id']:<{width}}  {c['old']:>6} -> {c['new']:<6} ({c['change']:+d})  {c['loc']}")
    st = [s for s in cmp["stages"] if s["old_hits"] != s["new_hits"] or s["old_runs"] != s["new_runs"]]
    if st:
        w("\nstage hits changed:")
        for s in st:
            w(f"  {s['pipeline']} {s['stage']}: {s['old_hits']} -> {s['new_hits']} hits, "
              f"{s['old_runs']} -> {s['new_runs']} runs")
    w("\nkernels per program (OLD -> NEW):")
    for p in cmp["programs"]:
        mark = "" if p["old_kernels"] == p["new_kernels"] else "   changed"
        w(f"  {p['program']}: {p['old_kernels']} -> {p['new_kernels']}{mark}")
    code = cmp["code"]
    if code:
        w(f"\nkernel code changed: {len(code)} kernel(s)")
        for c in code:
            lines = c["diff"]
            shown = lines if max_lines <= 0 else lines[:max_lines]
            for line in shown:
                w(line)
            if len(shown) < len(lines):
                w(f"... {len(lines) - len(shown)} more line(s) (--max-lines)")
    w()
    if not cmp["different"]:
        w(f"no differences: same rules, same hit counts, {cmp['kernels']} kernel(s) with the same code")
    else:
        n_counts = sum(p["old_kernels"] != p["new_kernels"] for p in cmp["programs"])
        w(f"{len(r['only_old'])} rule(s) only in OLD, {len(r['only_new'])} only in NEW, {len(r['changed'])} with "
          f"changed hits; {n_counts} program(s) with a changed kernel count; {len(code)} kernel(s) with changed code")


def cmd_diff(args: argparse.Namespace) -> int:
    if args.context < 0 or args.max_lines < 0:
        print("rulec: error: --context and --max-lines take a number >= 0", file=sys.stderr)
        return 2
    missing = [p for p in args.programs if not Path(p).is_file()]
    if missing:
        print(f"rulec: error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    try:
        revs = [resolve(args.old), resolve(args.new)]
        docs = run_revisions(revs, args.programs)
    except DiffError as e:
        details = e.details.strip().splitlines()[-STDERR_LINES:]  # the diagnostics or traceback's end
        if details:
            print("\n".join(details), file=sys.stderr)
        print(f"rulec: error: {e}", file=sys.stderr)
        return 2
    cmp = compare(docs[0], docs[1], args.context, (args.old, args.new))
    if args.json:
        json.dump(cmp, sys.stdout, indent=1)
        print()
    else:
        print_report(cmp, args.max_lines)
    return 1 if cmp["different"] else 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = sub.add_parser("diff", help="compare two revisions of the rule files over programs",
                       description="Run each PROG under two revisions of the rules (a rules folder or a git "
                                   "revision of the current repository) and compare them rule by rule: rules only "
                                   "in one, hit counts, kernels per program, kernel C code. Exit 0 when nothing "
                                   "differs, 1 when something does, 2 on trouble.")
    s.add_argument("old", metavar="OLD", help="a rules folder or a git revision (HEAD~1, a branch)")
    s.add_argument("new", metavar="NEW", help="a rules folder or a git revision")
    s.add_argument("programs", nargs="+", metavar="PROG", help="scripts to run under both")
    s.add_argument("--context", type=int, default=3, metavar="N", help="lines of context in code diffs (3)")
    s.add_argument("--max-lines", type=int, default=40, metavar="N",
                   help="lines shown of each kernel's code diff (40; 0: all)")
    s.add_argument("--json", action="store_true", help="print the comparison as JSON")
    s.set_defaults(func=cmd_diff)
    return s
