"""Run from an installed wheel, outside the checkout: a program schedules and runs on the wheel's prebuilt
rules, with an empty user cache, importing no compiler module and no YAML parser, and writing nothing but the
compiled kernels (the kernel cache: a C kernel is compiled on first use)."""
import os
import sys
from pathlib import Path

import numpy as np

import rulec
from rulec import Tensor

prebuilt = Path(rulec.__file__).parent / "_prebuilt"
assert (prebuilt / "manifest.json").is_file(), "the wheel has no prebuilt build"
before = sorted((p.name, p.stat().st_mtime_ns) for p in prebuilt.iterdir())

x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
out = ((Tensor(x) + 1).permute(2, 0, 1).reshape(4, 6).sum(1) * 2).numpy()
assert np.allclose(out, ((x + 1).transpose(2, 0, 1).reshape(4, 6).sum(1) * 2)), out
compiler = sorted(m for m in sys.modules if m.startswith("rulec.")
                  and not m.startswith(("rulec.runtime", "rulec.backends", "rulec.rules")))
assert not compiler, f"the installed runtime imported compiler modules: {compiler}"
assert "yaml" not in sys.modules, "the installed runtime imported PyYAML"
cache = Path(os.environ["RULEC_CACHE_DIR"])
written = sorted(p.name for p in cache.iterdir()) if cache.exists() else []
assert written in ([], ["kernels"]), f"the installed runtime wrote to the user cache: {written}"
assert not cache.exists() or any((cache / "kernels").glob("*.so")), "no compiled kernel in the kernel cache"
assert sorted((p.name, p.stat().st_mtime_ns) for p in prebuilt.iterdir()) == before, "the install folder was written"
print("wheel check: prebuilt rules used; no compiler, no YAML; only compiled kernels written")
