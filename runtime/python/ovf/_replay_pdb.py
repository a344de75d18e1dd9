"""--on-nan pdb (on_nan="pdb"): once the replay at a module event has named the op that
made the first NaN/Inf (_replay.py), the step is replayed once more and stops in pdb at
that op's line -- in the same call of its module as in the run, before the op runs --
with the forward's live locals. `n`, `s`, `p` and `l` work from there; `c` ends the
replay (nothing of it stays) and the run raises as it would have; `q` ends it too.

The line is found with sys.settrace, armed only inside that call of that module: the
rest of the replay runs untraced.
"""

import os
import pdb
import re
import sys

from ._replay import InCall


def stop(found):
    """`found`: the replay's _replay.Found; replays once more, stopping in pdb."""
    if found.producer is None:
        return
    op, _, where = found.producer
    place = re.fullmatch(r"(.+):(\d+) in (.+)", where)
    if place is None:
        _say(f"ovf: no pdb: the replay named {op} without its line")
        return
    module, call, name = found.target()
    stopper = _Stopper(place.group(1), int(place.group(2)))
    watch = InCall(module, call, lambda: sys.settrace(stopper.trace), lambda: sys.settrace(None))
    stopper.watch = watch
    _say(
        f"ovf: pdb at {where}, in call {call} of {name} in the step replayed once more,"
        f" before {op} runs; 'c' ends the replay, then the run raises as it would have"
    )
    found.again(watch.pre, watch.post)
    if not stopper.stopped:
        _say(f"ovf: no pdb: the replay did not reach {where} again")


class _Stopper:
    def __init__(self, file, line):
        self.file, self.line = file, line
        self.stopped, self.watch = False, None

    def trace(self, frame, event, arg):
        if event == "call":
            return self.trace if os.path.basename(frame.f_code.co_filename) == self.file else None
        if event != "line" or frame.f_lineno != self.line or self.stopped:
            return self.trace
        sys.settrace(None)
        self.stopped = True
        debugger = pdb.Pdb()
        debugger.reset()
        # What bdb's set_trace does, but stopping here, before the line runs.
        outer = frame
        while outer is not None:
            outer.f_trace = debugger.trace_dispatch
            debugger.botframe = outer
            outer = outer.f_back
        debugger.interaction(frame, None)
        if debugger.stopframe is debugger.botframe and debugger.returnframe is None:
            self.watch.end()  # `c`: the replay ends at its next module hook
            return None
        sys.settrace(debugger.trace_dispatch)  # `n`, `s`: pdb follows on
        return debugger.trace_dispatch


def _say(line):
    print(line, flush=True)
