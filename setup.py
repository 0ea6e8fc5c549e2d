"""Package discovery for rulec's mapped folders (the metadata is in pyproject.toml).

The top-level folders runtime/, backends/ and rules/ install as subpackages of `rulec`
(docs/architecture.md, "One import name"). Their own subpackages are found here, so a new
folder with an __init__.py can never be left out of a wheel.

A wheel also ships the build of rulec's own rules (`rulec/_prebuilt`), made by the compiler
from the files being packaged, so an installed rulec schedules without compiling first. It
needs rulec's dependencies at wheel-build time (`pip wheel --no-build-isolation`); without
them the wheel is built without it, and the rules are built into the user cache on first use.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

MAPPED = {"rulec": "rulec", "rulec.runtime": "runtime", "rulec.backends": "backends", "rulec.rules": "rules"}

packages = []
for name, folder in MAPPED.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]


class BuildPyWithRules(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install builds into the user cache from the checkout
        out = os.path.join(os.path.abspath(self.build_lib), "rulec", "_prebuilt")
        shutil.rmtree(out, ignore_errors=True)  # an earlier wheel build's sets must not ship
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(self.build_lib), "RULEC_CACHE_DIR": cache}
            code = "import sys; from rulec.build import build_prebuilt; build_prebuilt(sys.argv[1])"
            res = subprocess.run([sys.executable, "-c", code, out], cwd=cache, env=env, capture_output=True,
                                 text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["?"])[-1]
            print(f"rulec: building the wheel without prebuilt rules ({last})", file=sys.stderr)
        else:
            print(f"rulec: prebuilt rules in {out}", file=sys.stderr)


setup(packages=packages, package_dir=MAPPED, cmdclass={"build_py": BuildPyWithRules})
