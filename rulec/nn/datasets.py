"""`rulec.nn.datasets` (tinygrad's `nn.datasets`): lives in rulec/runtime/nn/datasets.py."""
from rulec.runtime.nn.datasets import *  # noqa: F401,F403
from rulec.runtime.nn.datasets import __all__  # noqa: F401
