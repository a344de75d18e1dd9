"""In the replayed step: run to the next line, into the functions it calls.

After `ovf step-into`. Steps into the program's functions and torch's Python code
(a submodule's forward), not into torch's module-call machinery.
"""

from .. import stepping

NAME = "step"


def add_arguments(p):
    pass


def run(session, args):
    return stepping.move(session, NAME)
