"""Stop at the first non-finite (NaN / Inf) module forward.

Before `run`, on an unmodified script: puts ovf's bootstrap on the inferior's
PYTHONPATH (OVF_* variables carry the options) and a pending breakpoint on the
runtime's stop hook, ovf_stop_event. On a running or attached process: writes
the runtime's control block. The breakpoint is an ordinary one: `info
breakpoints`, `delete`, `disable`, `ignore` and `commands` work on it.
"""

from ovf_ring.errors import OvfError

from .. import arming
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
        "--capture",
        choices=["optimizer"],
        default=None,
        help=(
            "optimizer: copy the parameters and state each optimizer step starts from, so "
            "that a NaN/Inf the step writes (or its backward made) is replayed and its op "
            "named (a copy a step)"
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
        "--early",
        action="store_true",
        help=(
            "also stop before the first NaN/Inf: when a module's output grows fast enough to "
            "pass its dtype's largest value within --early-horizon batches, or an optimizer "
            "step changes the weights by more than --update-ratio times their size"
        ),
    )
    p.add_argument(
        "--early-horizon",
        type=types.batches_ahead,
        default=None,
        metavar="K",
        help="with --early: batches ahead to look (default 4)",
    )
    p.add_argument(
        "--update-ratio",
        type=types.threshold,
        default=None,
        metavar="X",
        help="with --early: the |dw|/|w| of an optimizer step that stops (default 1; 0: off)",
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
    if (args.early_horizon is not None or args.update_ratio is not None) and not args.early:
        raise OvfError("ovf break-on-nan: --early-horizon and --update-ratio tune --early: add it")
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
    a.capture_optimizer = args.capture == "optimizer"
    a.scaler_skips = args.scaler_skips
    a.scale_floor = args.scale_floor
    a.early = args.early
    a.early_horizon = arming.EARLY_HORIZON if args.early_horizon is None else args.early_horizon
    a.update_ratio = arming.UPDATE_RATIO if args.update_ratio is None else args.update_ratio
    a.touched.update(("observe", "scaler", "early"))
    return session.apply(a)
