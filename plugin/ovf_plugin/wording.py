"""The words each front end's messages use for its own debugger: the plugin's
commands tell the user what to type next, and that depends on the debugger."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Wording:
    debugger: str  # its command: "gdb"
    launcher: str  # ovf's launcher for it: "ovf-gdb"
    attach: str  # how to attach to a process: "gdb -p PID"
    library_hint: str  # how to point it at a shared library that moved ("" if no such setting)


GDB = Wording(
    debugger="gdb",
    launcher="ovf-gdb",
    attach="gdb -p PID",
    library_hint="point the debugger at it with: set solib-search-path DIR",
)
LLDB = Wording(
    debugger="lldb",
    launcher="ovf-lldb",
    attach="lldb -p PID",
    library_hint="point lldb at it with: settings append target.exec-search-paths DIR",
)
