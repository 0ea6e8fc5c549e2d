"""A judge for the `rulec reduce` tests: `python reduce_check.py [--log DIR] [--hang-without WORD] CANDIDATE`.

Exits 1 ("still fails") when the candidate assigns a name from an expression that calls `.pad(...)` and a
later statement calls `.flip(...)` on an expression reading that name; else exits 0. With --log, each
candidate is copied into DIR; with --hang-without, a candidate whose text lacks WORD sleeps for a minute
(for the timeout test). Exits 0 when $RULEC_REDUCE_FILE is not the candidate's path."""
import argparse
import ast
import os
import shutil
import sys
import time
from pathlib import Path


def calls(node, name):
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
               for n in ast.walk(node))


def fails(tree):
    padded = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Assign) and calls(stmt.value, "pad"):
            padded |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        for n in ast.walk(stmt) if isinstance(stmt, ast.stmt) else ():
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "flip"
                    and any(isinstance(m, ast.Name) and m.id in padded for m in ast.walk(n.func.value))):
                return True
    return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log")
    p.add_argument("--hang-without")
    p.add_argument("candidate")
    a = p.parse_args()
    if os.environ.get("RULEC_REDUCE_FILE") != a.candidate:
        return 0  # never "fails": a test then sees that nothing was reduced
    text = Path(a.candidate).read_text()
    if a.log:
        n = len(os.listdir(a.log))
        shutil.copy(a.candidate, Path(a.log) / f"{n:05}.py")
    if a.hang_without and a.hang_without not in text:
        time.sleep(60)
    return 1 if fails(ast.parse(text)) else 0


if __name__ == "__main__":
    sys.exit(main())
