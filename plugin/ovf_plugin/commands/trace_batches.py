"""Print every frame of the given batches (the reference's trace_batch_nums).

`ovf trace-batches 1,3` prints each forward frame of batches 1 and 3 in the
reference's format as it happens, without stopping; `ovf trace-batches off`
stops tracing. Same as `ovf watch --batches LIST` for all modules.
"""

from . import types

NAME = "trace-batches"


def add_arguments(p):
    p.add_argument(
        "batches", type=types.batch_list, metavar="LIST", help="e.g. 1,3 (0-based), or off"
    )


def run(session, args):
    a = session.staged()
    a.trace_batches, a.trace_module = args.batches, ""
    a.touched.add("trace")
    return session.apply(a)
