"""Show the locals of the program's frame where the latest event's value was made.

Each tensor with its abs min / abs max (the report's columns), dtype, shape,
device and NaN / Inf counts, non-finite ones marked; other values by type
(their repr is never run). Names select locals. Read from the runtime's
snapshot, live or from a core, in gdb and LLDB alike.
"""

from ovf_ring import python_stack

NAME = "py-locals"


def add_arguments(p):
    p.add_argument("names", nargs="*", metavar="NAME", help="only these locals")


def run(session, args):
    return python_stack.local_values(session.ring(), args.names)
