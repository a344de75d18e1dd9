"""The stop breakpoint: an ordinary gdb breakpoint on the runtime's stop hook
whose stop() decides silently, before gdb prints anything."""

import gdb


class StopBreakpoint(gdb.Breakpoint):
    def __init__(self, function):
        # A Python breakpoint made before `run` goes pending and resolves when
        # the runtime library is loaded, whatever `set breakpoint pending` says.
        super().__init__(function, gdb.BP_BREAKPOINT, internal=False)
        self.callback = None
        self.later = ""  # printed by on_stop, after gdb's own "Breakpoint N, ..." line

    def stop(self):
        if self.callback is None:
            return True
        try:
            decision = self.callback()
        except Exception as e:  # noqa: BLE001 - a failure here must stop, not kill gdb's event loop
            self.later = f"ovf: cannot decide about this stop ({type(e).__name__}: {e})\n"
            return True
        if decision.now:
            gdb.write(decision.now)
            gdb.flush()
        self.later = decision.later if decision.stop else ""
        return decision.stop


def on_stop(event):
    """gdb.events.stop handler: prints the summary of the ovf stop, if it is one,
    and selects the interpreter frame running the producing line, where gdb's
    own py-locals and py-print work at once."""
    for bp in getattr(event, "breakpoints", ()):
        if isinstance(bp, StopBreakpoint) and bp.later:
            gdb.write(bp.later)
            bp.later = ""
            _select_python_frame()


def _select_python_frame():
    try:
        frame = gdb.newest_frame()
        while frame is not None and frame.name() != "_PyEval_EvalFrameDefault":
            frame = frame.older()
        if frame is not None:
            frame.select()
    except gdb.error:
        pass  # no stack to walk (a core without one): the stop frame stays selected
