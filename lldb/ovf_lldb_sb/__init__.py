"""ovf's LLDB front end: the `ovf` commands over LLDB's SB API.

All logic lives in the debugger-independent ovf_plugin; this package adapts
LLDB's memory, symbols, breakpoints and launch environment to ovf_plugin's
Target. lldb/ovf_lldb.py is the file to `command script import`.
"""

from .breakpoint import stop_callback
from .commands import COMMAND_CLASSES, register

__all__ = ["COMMAND_CLASSES", "register", "stop_callback"]
