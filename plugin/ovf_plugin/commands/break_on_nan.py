"""Stop at the first non-finite (NaN / Inf) module forward.

Before `run`, on an unmodified script: puts ovf's bootstrap on the inferior's
PYTHONPATH (OVF_* variables carry the options) and a pending breakpoint on the
runtime's stop hook, ovf_stop_event. On a running or attached process: writes
the runtime's control block. The breakpoint is an ordinary one: `info
breakpoints`, `delete`, `disable`, `ignore` and `commands` work on it.
"""

from ..condition import FIELDS, Condition
from . import types

NAME = "break-on-nan"


def add_arguments(p):
    which = p.add_mutually_exclusive_group()
    which.add_argument("--nan", action="store_true", help="stop on NaN only")
    which.add_argument("--inf", action="store_true", help="stop on +/-Inf only")
    p.add_argument(
        "--module",
        type=types.module_glob,
        default="",
        metavar="GLOB",
        help="only modules whose path matches, e.g. 'encoder.block.*'",
    )
    p.add_argument(
        "--after-batch",
        type=types.batch_number,
        default=0,
        metavar="N",
        help="only in batches N and later (0-based)",
    )
    p.add_argument(
        "--ops",
        action="store_true",
        help=(
            "check every ATen op's outputs: stop inside the forward, right after the op "
            "that produced the NaN/Inf (py-bt shows the line, py-locals its locals)"
        ),
    )
    p.add_argument(
        "--backward",
        action="store_true",
        help=(
            "also stop on a NaN/Inf made by the backward pass, named by the forward op "
            "and module whose gradient it is"
        ),
    )
    p.add_argument(
        "--carriers",
        action="store_true",
        help=(
            "stop also where a NaN/Inf is only passed on (a module or op given one); by "
            "default only where one is produced from finite values, or first seen (with "
            "--module: anywhere in those modules)"
        ),
    )
    p.add_argument(
        "--scaler-skips",
        type=types.skips,
        default=0,
        metavar="N",
        help="stop when a loss scaler (GradScaler) skips N steps in a row (default 0: never)",
    )
    p.add_argument(
        "--scale-floor",
        type=types.threshold,
        default=1.0,
        metavar="X",
        help=(
            "stop when a skipped step takes a loss scaler's scale below X (default 1: a scale "
            "that shrinks the loss; 0: never)"
        ),
    )
    p.add_argument(
        "--if",
        dest="condition",
        default=None,
        metavar="EXPR",
        help=(
            "a Python expression over the event's fields, evaluated by the debugger "
            "once the runtime's filters matched: "
        )
        + ", ".join(FIELDS),
    )


def run(session, args):
    condition = Condition(args.condition) if args.condition is not None else None
    a = session.staged()
    a.nan = not args.inf
    a.inf = not args.nan
    a.module = args.module
    a.after_batch = args.after_batch
    a.condition = condition
    a.ops = args.ops or args.backward
    a.backward = args.backward
    a.carriers = args.carriers
    a.scaler_skips = args.scaler_skips
    a.scale_floor = args.scale_floor
    a.touched.update(("observe", "scaler"))
    return session.apply(a)
