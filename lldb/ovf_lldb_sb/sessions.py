"""One ovf Session per LLDB debugger (lldb-dap and scripts may make several).

Kept here, not in ovf_lldb.py: LLDB re-executes the imported module on a
second `command script import`, which would forget the sessions."""

from ovf_plugin.session import Session

from .target import LldbTarget

_sessions = {}  # SBDebugger.GetID() -> Session


def find(debugger):
    return _sessions.get(debugger.GetID()) if debugger is not None and debugger.IsValid() else None


def create(debugger, package_dirs):
    """The debugger's session, made on first use; (session, made now)."""
    session = find(debugger)
    if session is not None:
        return session, False
    session = _sessions[debugger.GetID()] = Session(LldbTarget(debugger), package_dirs)
    return session, True
