"""`rulec.nn.optim` (tinygrad's `nn.optim`): lives in rulec/runtime/nn/optim.py."""
from rulec.runtime.nn.optim import *  # noqa: F401,F403
from rulec.runtime.nn.optim import __all__  # noqa: F401
