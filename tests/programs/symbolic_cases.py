"""Every case of tests/test_symbolic.py (each rule of the `symbolic` set with an input it rewrites), run
through the rule set: a corpus for `rulec stats`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rulec  # noqa: E402
from test_symbolic import CASES  # noqa: E402

symbolic = rulec.load("symbolic")
wrong = [(rule, before) for rule, before, after in CASES if symbolic.rewrite(before) is not after]
assert not wrong, f"cases whose result changed: {wrong[:3]}"
print(f"{len(CASES)} symbolic cases rewrite as expected")
