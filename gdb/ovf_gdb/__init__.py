"""ovf's GDB front end: the `ovf` commands over gdb's Python API.

All logic lives in the debugger-independent ovf_plugin; this package adapts
gdb's memory, symbols, breakpoints and environment to ovf_plugin's Target.
"""

from .commands import register

__all__ = ["register"]
