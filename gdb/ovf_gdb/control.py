"""ovf_plugin's Control over gdb's Python API: the stop breakpoint and the
environment of the next `run`."""

from ovf_plugin.control import Control

import gdb

from .breakpoint import StopBreakpoint


class GdbControl(Control):
    def __init__(self):
        self._breakpoint = None

    def set_stop_breakpoint(self, function, callback):
        bp = self._breakpoint
        if bp is None or not bp.is_valid():
            bp = self._breakpoint = StopBreakpoint(function)
        bp.callback = callback
        return bp

    def get_environment(self, name):
        text = gdb.execute(f"show environment {name}", to_string=True)
        prefix = f"{name} = "
        return text[len(prefix) :].rstrip("\n") if text.startswith(prefix) else None

    def set_environment(self, name, value):
        if value is None:
            gdb.execute(f"unset environment {name}", to_string=True)
        else:
            gdb.execute(f"set environment {name}={value}", to_string=True)

    def stop_breakpoint_enabled(self):
        bp = self._breakpoint
        return bp is not None and bp.is_valid() and bp.enabled

    def resume(self):
        gdb.execute("continue")
        return ""
