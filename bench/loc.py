"""How much of the scheduler is rules and how much is Python, at any git revision.

    python bench/loc.py [REV ...]        # default: the working tree

Code lines are lines that are neither blank nor only a comment (docstrings count: they are code that the
reader reads). "Callback Python" is what the scheduler's rule files and pipeline call: runtime's
callbacks, the pipeline driver and the pure helpers the rule files use. Rules are counted by their
`name:` keys, and `call:` rules by their `call:` keys, in rules/schedule/*.yaml.
"""
from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The same parts wherever they live: runtime/ was split into subpackages, and the pipeline runner (which
# codegen's pipelines use too) moved from runtime/schedule/ to runtime/engine/; it is counted still.
PARTS = {
    "callback modules": ("runtime/callbacks/*.py", "runtime/schedule/callbacks/*.py"),
    "pure helpers": ("runtime/schedule_helpers.py", "runtime/schedule/helpers.py", "runtime/schedule/multi.py"),
    "pipeline runner and driver": ("runtime/schedule.py", "runtime/schedule/pipeline.py", "runtime/schedule/matchers.py",
                                   "runtime/schedule/scheduler.py", "runtime/schedule/schedule_cache.py", "runtime/engine/pipeline.py",
                                   "runtime/engine/matchers.py"),
}


def files(rev: str | None, pattern: str) -> list[str]:
    if rev is None:
        return sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern) if p.is_file())
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    rx = re.compile("^" + re.escape(pattern).replace(r"\*", "[^/]*") + "$")
    return sorted(f for f in out if rx.match(f))


def text(rev: str | None, path: str) -> str:
    if rev is None:
        return (ROOT / path).read_text()
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def code_lines(src: str, comment: str) -> int:
    return sum(1 for line in src.splitlines() if line.strip() and not line.strip().startswith(comment))


def measure(rev: str | None) -> dict[str, int]:
    lines = {part: sum(code_lines(text(rev, f), "#") for f in sorted({f for pat in pats for f in files(rev, pat)
                                                                    if not f.endswith("__init__.py")}))
             for part, pats in PARTS.items()}
    yaml = [f for f in files(rev, "rules/schedule/*.yaml") if not f.endswith("pipeline.yaml")]
    yaml_text = [text(rev, f) for f in yaml]
    return {
        "callback Python code lines": sum(lines.values()),
        **{f"  {part}" : n for part, n in lines.items()},
        "schedule rule files": len(yaml),
        "schedule rule-file code lines": sum(code_lines(t, "#") for t in yaml_text),
        "schedule rules": sum(len(re.findall(r"^\s*-\s+name:|^\s*-\s*\{\s*name:", t, re.M)) for t in yaml_text),
        "schedule call: rules": sum(len(re.findall(r"^\s+call:|[{,]\s*call:", t, re.M)) for t in yaml_text),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("revs", nargs="*", help="git revisions to measure (default: the working tree)")
    args = ap.parse_args()
    revs = args.revs or [None]
    rows = {rev: measure(rev) for rev in revs}
    names = ["working tree" if r is None else r for r in revs]
    keys = list(next(iter(rows.values())))
    width = max(map(len, keys))
    print(f"| {'':{width}} | " + " | ".join(names) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(n) + 2) for n in names) + "|")
    for k in keys:
        print(f"| {k:{width}} | " + " | ".join(f"{rows[r][k]:>{len(n)}}" for r, n in zip(revs, names)) + " |")


if __name__ == "__main__":
    main()
