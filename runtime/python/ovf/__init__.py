"""ovf: find the first inf/nan in a PyTorch run, stop there in gdb or lldb.

Drop-in for ``transformers.debug_utils``::

    from ovf import DebugUnderflowOverflow, detect_overflow
    debug_overflow = DebugUnderflowOverflow(model)

No code change: ``python3 -m ovf train.py ...``, or ``ovf break-on-nan`` in gdb/lldb.
"""

from ._debug_underflow_overflow import DebugUnderflowOverflow, detect_overflow
from ._hooks import NonFiniteError
from ._options import OptionError
from ._ovf import __version__

__all__ = ["DebugUnderflowOverflow", "detect_overflow", "NonFiniteError", "OptionError", "__version__"]
