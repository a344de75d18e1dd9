"""In the replayed step: run until this function returns, to the next line of its caller.

After `ovf step-into`. In the producing module's forward itself: to where it returns.
"""

from .. import stepping

NAME = "finish"


def add_arguments(p):
    pass


def run(session, args):
    return stepping.move(session, NAME)
