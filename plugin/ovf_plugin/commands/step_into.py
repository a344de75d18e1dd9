"""Replay the step and stop at the first line of the module that made the value.

At an event whose replay named the op that made the NaN/Inf (module mode, the
default), the step's forward runs again in the process from the inputs and random
generators it started with, and stops at the first line of the producing module's
forward, in the same call of it as in the run. `ovf next`, `ovf step` and
`ovf finish` move on from there, `ovf py-locals` shows the live locals with their
statistics; `continue` ends the replay and comes back to the event's stop, the
process's state as it was.
"""

from .. import stepping

NAME = "step-into"


def add_arguments(p):
    pass


def run(session, args):
    return stepping.move(session, NAME)
