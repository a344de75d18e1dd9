"""The stop breakpoint's callback: LLDB runs it when ovf_stop_event is hit,
before it reports the stop; returning False resumes the process silently.

LLDB has no event that runs after it has printed a stop (gdb has
gdb.events.stop), and in batch mode the stop is printed only when `run` or
`continue` returns. So the summary is printed here, before LLDB's own
"stop reason = breakpoint N.1" lines, where gdb prints it after its
"Breakpoint N, ovf_stop_event (...)" line.
"""

import sys

from . import sessions


def _write(text):
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def stop_callback(frame, bp_loc, internal_dict):
    """SBBreakpoint.SetScriptCallbackFunction's function (3-argument form, which
    every LLDB with the `command container` command has)."""
    target = frame.GetThread().GetProcess().GetTarget()
    session = sessions.find(target.GetDebugger())
    if session is None or not session.control.is_stop_breakpoint(
        target, bp_loc.GetBreakpoint().GetID()
    ):
        return True  # not ours any more (another target's, or ovf was reloaded): an ordinary stop
    callback = session.control.callback
    if callback is None:
        return True
    try:
        with session.target.pinned(target):
            decision = callback()
    except Exception as e:  # noqa: BLE001 - a failure here must stop, never resume blindly
        _write(f"ovf: cannot decide about this stop ({type(e).__name__}: {e})\n")
        return True
    _write(decision.now)
    if decision.stop:
        _write(decision.later)
    return decision.stop
