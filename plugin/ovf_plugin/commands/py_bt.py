"""Show the Python stack where the latest event's value was made.

The runtime took it at the event (its snapshot): works in gdb and LLDB, live
and on core files, on every CPython, without python3-dbg. The program's own
innermost frame is marked; `ovf py-locals` shows its locals.
"""

from ovf_ring import python_stack

NAME = "py-bt"


def add_arguments(p):
    pass


def run(session, args):
    return python_stack.backtrace(session.ring())
