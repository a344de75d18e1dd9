"""In the replayed step: run to the next line of this function (over the calls it makes).

After `ovf step-into`. Where the function returns, the next line of its caller
inside the producing module's forward; where that forward returns, the stop says so
and the next move ends the replay.
"""

from .. import stepping

NAME = "next"


def add_arguments(p):
    pass


def run(session, args):
    return stepping.move(session, NAME)
