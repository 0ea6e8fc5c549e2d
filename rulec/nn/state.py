"""`rulec.nn.state` (tinygrad's `nn.state`): lives in rulec/runtime/nn/state.py."""
from rulec.runtime.nn.state import *  # noqa: F401,F403
from rulec.runtime.nn.state import __all__  # noqa: F401
