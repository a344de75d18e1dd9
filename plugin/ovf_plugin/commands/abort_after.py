"""Stop once batch N has finished (the reference's abort_after_batch_num).

The runtime then raises the reference's ValueError; under the debugger it
stops first, so the end state can be looked at. `ovf abort-after off` removes it.
"""

from . import types

NAME = "abort-after"


def add_arguments(p):
    p.add_argument(
        "batch", type=types.batch_or_off, metavar="N", help="a batch number (0-based), or off"
    )


def run(session, args):
    a = session.staged()
    a.abort_after = -1 if args.batch is None else args.batch
    a.touched.add("abort_after")
    return session.apply(a)
