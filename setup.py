"""Package discovery for rulec's mapped folders (the metadata is in pyproject.toml).

The top-level folders runtime/, backends/ and rules/ install as subpackages of `rulec`
(docs/architecture.md, "One import name"). Their own subpackages are found here, so a new
folder with an __init__.py can never be left out of a wheel.
"""
from setuptools import find_packages, setup

MAPPED = {"rulec": "rulec", "rulec.runtime": "runtime", "rulec.backends": "backends", "rulec.rules": "rules"}

packages = []
for name, folder in MAPPED.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=MAPPED)
