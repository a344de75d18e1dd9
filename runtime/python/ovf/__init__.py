"""ovf: find the first inf/nan in a PyTorch run, stop there in gdb or lldb.

Drop-in for ``transformers.debug_utils``::

    from ovf import DebugUnderflowOverflow, detect_overflow
    debug_overflow = DebugUnderflowOverflow(model)

No code change: ``python3 -m ovf train.py ...``, or ``ovf break-on-nan`` in gdb/lldb.

The names below load torch and the runtime on first use, so that tools that only
read core files (``python3 -m ovf.postmortem``) start without torch.
"""

import atexit
import importlib
import os
import sys

__version__ = "0.1.0"


def _judge_at_exit():
    # Registered at the first `import ovf`, before torch's hooks and usually
    # before the user's exit handlers: it runs after them (see _hooks).
    hooks = sys.modules.get("ovf._hooks")
    if hooks is not None:
        hooks.exit_as_judged()


atexit.register(_judge_at_exit)

# For C++ programs of a pip-installed ovf: find_package(ovf) with this on CMAKE_PREFIX_PATH
# (as torch.utils.cmake_prefix_path for torch).
cmake_prefix_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "cmake")

_LAZY = {
    "DebugUnderflowOverflow": "._debug_underflow_overflow",
    "detect_overflow": "._debug_underflow_overflow",
    "NonFiniteError": "._hooks",
    "EarlyWarningError": "._hooks",
    "expected_nonfinite": "._expected",
    "OptionError": "._options",
    "replay_batch": "._dump_batch",
}

__all__ = [
    "DebugUnderflowOverflow",
    "detect_overflow",
    "NonFiniteError",
    "EarlyWarningError",
    "OptionError",
    "expected_nonfinite",
    "replay_batch",
    "__version__",
    "cmake_prefix_path",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ovf' has no attribute {name!r}")
