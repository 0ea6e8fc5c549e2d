"""`rulec.nn`: layers (as tinygrad's `tinygrad.nn`), with `rulec.nn.state` and `rulec.nn.optim`."""
from rulec.runtime.nn import *  # noqa: F401,F403
from rulec.runtime.nn import __all__  # noqa: F401

from . import optim, state  # noqa: F401,E402
