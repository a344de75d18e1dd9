"""`ovf step-into` and its moves (`ovf next`, `ovf step`, `ovf finish`) in gdb and LLDB.

At an event whose replay named the op that made the value (_replay.py), a debugger
stopped there may ask for the step to be replayed once more (control.step_request).
The runtime calls run() when the stop hook returns: the batch root's forward runs
again from the held inputs and generators, and inside the same call of the producing
module as in the run, the lines are followed with sys.settrace (armed only in that
call: sys.monitoring would not make the rest cheaper, since nothing else is traced).
At each line where the debugger's request says to stop, _ovf.step_stop() takes the
snapshot of that frame (`ovf py-locals` shows its live locals with their statistics)
and calls the stop hook, where the debugger's breakpoint is; it returns the next
request. The debugger writes memory and continues: no code of its runs here.

A plain `continue` ends the replay: nothing of it stays (_replay's restore), and the
event's stop comes again.
"""

import os
import sys

from . import _ovf, _replay

_STEP = _ovf.STEP_REQUEST  # enum ovf_step_request
_STATE = _ovf.STEP_STATE  # enum ovf_step_state
_OVF_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# torch's module call machinery (_call_impl and its hooks): the forward's caller,
# not the model's code; lines there are passed through, never stopped at.
_CALL_MACHINERY = os.sep + os.path.join("torch", "nn", "modules", "module.py")


def run(frame_seq):
    """The runtime's call when the debugger asked to step into the event `frame_seq`'s
    step; returns how it went, for the event's stop that comes after."""
    found = _replay.found
    if found is None or found.producer is None:
        return "no replay named the op that made this event's value: nothing to step into"
    module, call, name = found.target()
    stepper = _Stepper(module, f"{name}, call {call} of the replayed step")
    watch = _replay.InCall(module, call, stepper.arm, stepper.disarm)
    stepper.watch = watch
    error = found.again(watch.pre, watch.post)
    if not stepper.stopped:
        problem = f" ({error})" if error else ""
        return f"the replay did not reach the forward of {name} again{problem}"
    return "the replay ended: back at the event, the process's state as it was before step-into"


class _Stepper:
    def __init__(self, module, context):
        self.module, self.context = module, context
        self.forward = None  # the producing call's forward frame, once it began
        self.request, self.depth = _STEP["into"], 0  # what to stop at next, from which depth
        self.stopped, self.watch = False, None

    def arm(self):
        sys.settrace(self.trace)

    def disarm(self):
        sys.settrace(None)

    def trace(self, frame, event, arg):
        """Both the global and the local trace function (one state machine)."""
        if self.watch.ended:
            return None
        if event == "call":
            return self.trace if self._follows(frame) else None
        if event == "line" and self._wanted(frame):
            self._stop(frame, _STATE["at_line"], "")
        elif event == "return" and frame is self.forward:
            self._stop(frame, _STATE["returned"], "; it returns: a move from here ends the replay")
            self._end()
        return self.trace if not self.watch.ended else None

    def _follows(self, frame):
        """A new frame is followed when it is the producing forward or the program calls
        it from a followed frame: a submodule's forward through torch's call machinery,
        not the machinery's own checks or the hooks it runs (ovf's among them)."""
        if self.forward is None:
            if _is_forward_of(frame, self.module):
                self.forward = frame
                return True
            return False
        caller = frame.f_back
        if caller is None or caller.f_trace != self.trace:
            return False
        if caller.f_code.co_filename.endswith(_CALL_MACHINERY):
            # on to a submodule's forward, not the machinery's checks (is_compiling)
            return frame.f_code.co_name == "forward" or frame.f_code.co_filename.endswith(
                _CALL_MACHINERY
            )
        return not frame.f_code.co_filename.startswith(_OVF_DIR)

    def _wanted(self, frame):
        if self.request == _STEP["into"]:
            return frame is self.forward
        if frame.f_code.co_filename.endswith(_CALL_MACHINERY) or not self._inside(frame):
            return False
        if self.request == _STEP["step"]:
            return True
        depth = _depth(frame)
        if self.request == _STEP["next"]:
            return depth <= self.depth
        return depth < self.depth  # finish

    def _inside(self, frame):
        """`frame` is the producing forward or runs under it."""
        while frame is not None:
            if frame is self.forward:
                return True
            frame = frame.f_back
        return False

    def _stop(self, frame, state, after):
        self.stopped = True
        code = frame.f_code
        where = (
            f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
            f" ({self.context}{after})"
        )
        self.request, self.depth = _ovf.step_stop(frame, where, state), _depth(frame)
        if self.request not in (_STEP["next"], _STEP["step"], _STEP["finish"]):
            self._end()  # `continue` (or no debugger): the replay ends here

    def _end(self):
        sys.settrace(None)
        self.watch.end()


def _is_forward_of(frame, module):
    return frame.f_code.co_name == "forward" and frame.f_locals.get("self") is module


def _depth(frame):
    depth = 0
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth
