"""One ovf Session per LLDB debugger (lldb-dap and scripts may make several).

Kept here, not in ovf_lldb.py: LLDB re-executes the imported module on a
second `command script import`, which would forget the sessions."""

from ovf_plugin.session import Session
from ovf_plugin.wording import LLDB

from .control import LldbControl
from .target import LldbTarget

_sessions = {}  # SBDebugger.GetID() -> Session


def find(debugger):
    return _sessions.get(debugger.GetID()) if debugger is not None and debugger.IsValid() else None


def create(debugger, package_dirs):
    """The debugger's session, made on first use; (session, made now)."""
    session = find(debugger)
    if session is not None:
        return session, False
    memory = LldbTarget(debugger)
    session = Session(memory, LldbControl(memory), LLDB, package_dirs)
    _sessions[debugger.GetID()] = session
    return session, True
