"""How many examples a property test draws.

By default each property test draws its own count. RULEC_PROPERTY_SEARCH=n draws n times as many, to hunt
for new bugs (`--hypothesis-seed=k` picks the draw); the closing figures of a change are measured that way.
"""
from __future__ import annotations

import os

SEARCH = int(os.environ.get("RULEC_PROPERTY_SEARCH", "0"))


def examples(n: int) -> int:
    return n * max(1, SEARCH)
