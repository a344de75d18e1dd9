"""ovf_plugin's Control over LLDB's SB API: the stop breakpoint and the
environment of the next `run`, for the SBTarget the memory side has pinned."""

import re

from ovf_plugin.control import Control
from ovf_ring.errors import OvfError

import lldb

CALLBACK = "ovf_lldb.stop_callback"  # resolved by LLDB in the module `command script import` loaded
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LldbControl(Control):
    def __init__(self, memory):
        """`memory`: the session's LldbTarget, whose pinned SBTarget this acts on."""
        self._memory = memory
        self.debugger = memory.debugger
        self._breakpoint = None  # (SBTarget, breakpoint id)
        self.callback = None

    # ------------------------------------------------------------ breakpoint

    def set_stop_breakpoint(self, function, callback):
        target = self._memory.sbtarget()
        if not target.IsValid():
            raise OvfError(
                "ovf: no program: start lldb with one (lldb -- python3 train.py) "
                "or `target create` it first"
            )
        bp = None
        if self._breakpoint is not None and self._breakpoint[0] == target:
            bp = target.FindBreakpointByID(self._breakpoint[1])
        if bp is None or not bp.IsValid():
            # Made before `run` it is pending and resolves when the runtime library loads.
            bp = target.BreakpointCreateByName(function)
            self._breakpoint = (target, bp.GetID())
        error = bp.SetScriptCallbackFunction(CALLBACK)  # None in the one-argument form
        if error is not None and error.Fail():
            raise OvfError(f"ovf: cannot set the breakpoint's callback: {error.GetCString()}")
        self.callback = callback
        return bp

    def is_stop_breakpoint(self, target, breakpoint_id):
        return (
            self._breakpoint is not None
            and self._breakpoint[0] == target
            and self._breakpoint[1] == breakpoint_id
        )

    # ------------------------------------------------------------ environment

    def get_environment(self, name):
        target = self._memory.sbtarget()
        if not target.IsValid():
            return None
        return target.GetEnvironment().Get(name)

    def set_environment(self, name, value):
        target = self._memory.sbtarget()
        if not target.IsValid():
            raise OvfError(
                "ovf: no program: start lldb with one (lldb -- python3 train.py) "
                "or `target create` it first"
            )
        # target.env-vars holds what the user set; the inferior gets LLDB's own
        # environment (target.inherit-env) less target.unset-env-vars plus
        # target.env-vars. Values go through the SB API: `settings set` would
        # evaluate backticks in them.
        explicit = _settings_dictionary(self.debugger, "target.env-vars")
        if value is None:
            explicit.pop(name, None)
        else:
            explicit[name] = value
        environment = lldb.SBEnvironment()
        for key, text in explicit.items():
            environment.Set(key, text, True)
        info = target.GetLaunchInfo()
        info.SetEnvironment(environment, False)
        target.SetLaunchInfo(info)
        if value is None and target.GetEnvironment().Get(name) is not None and _NAME.match(name):
            self._command(f"settings append target.unset-env-vars {name}")

    # ------------------------------------------------------------ running

    def stop_breakpoint_enabled(self):
        if self._breakpoint is None:
            return False
        bp = self._breakpoint[0].FindBreakpointByID(self._breakpoint[1])
        return bp.IsValid() and bp.IsEnabled()

    def resume(self):
        result = lldb.SBCommandReturnObject()
        self.debugger.GetCommandInterpreter().HandleCommand("process continue", result)
        if not result.Succeeded():
            raise OvfError(f"ovf: process continue: {(result.GetError() or '').strip()}")
        return result.GetOutput() or ""

    def _command(self, line):
        result = lldb.SBCommandReturnObject()
        self.debugger.GetCommandInterpreter().HandleCommand(line, result)
        if not result.Succeeded():
            raise OvfError(f"ovf: {line}: {(result.GetError() or '').strip()}")


def _settings_dictionary(debugger, name):
    data = debugger.GetSetting(name)
    keys = lldb.SBStringList()
    if not data.IsValid() or not data.GetKeys(keys):
        return {}
    out = {}
    for i in range(keys.GetSize()):
        key = keys.GetStringAtIndex(i)
        out[key] = data.GetValueForKey(key).GetStringValue(1 << 20) or ""
    return out
