"""Trace modules' frames in given batches; stop when values leave a range.

`--batches` prints every matching frame of those batches in the reference's
format (its trace_batch_nums) without stopping. `--above X` stops when a
float tensor's finite abs max exceeds X (e.g. 1e4: fp16 overflows at 6.5e4),
`--below Y` when its smallest non-zero |x| falls under Y. `--cast fp8_e4m3
--overflow 0.001` stops when a cast of a tensor to that type would overflow more
than 0.1% of its values (--flush, --subnormal: flushed to zero, made subnormal);
`--cast` alone only counts, for `ovf frames --headroom`. `ovf watch off` removes
them all.
"""

from ovf_ring import layout
from ovf_ring.errors import OvfError

from . import types

NAME = "watch"


def add_arguments(p):
    p.add_argument(
        "glob",
        nargs="?",
        type=types.module_glob,
        default="",
        metavar="GLOB",
        help="module paths to watch (default: all); 'off' removes the watch",
    )
    p.add_argument(
        "--batches",
        type=types.batch_list,
        default=None,
        metavar="LIST",
        help="batches to trace, e.g. 1,3 (0-based)",
    )
    p.add_argument(
        "--above",
        type=types.threshold,
        default=None,
        metavar="X",
        help="stop when a finite abs max rises above X",
    )
    p.add_argument(
        "--below",
        type=types.threshold,
        default=None,
        metavar="Y",
        help="stop when a non-zero abs min falls below Y",
    )
    p.add_argument(
        "--headroom",
        choices=sorted(layout.HEADROOM_DTYPES),
        default=None,
        help=(
            "stop before a cast to this dtype overflows: when abs max passes --fraction of its"
            " largest value; lines also count values below its smallest normal (ovf frames"
            " --headroom)"
        ),
    )
    p.add_argument(
        "--cast",
        choices=layout.CAST_TARGETS,
        default=None,
        help=(
            "count in every tensor what casts to fp16, bf16 and fp8 would lose; with "
            "--overflow, --flush or --subnormal stop when a cast to this one loses more"
        ),
    )
    for loss, what in (
        ("overflow", "overflow (become inf; e4m3: pass its largest value)"),
        ("flush", "flush to zero"),
        ("subnormal", "become subnormal"),
    ):
        p.add_argument(
            f"--{loss}",
            type=types.share,
            default=None,
            metavar="S",
            help=f"with --cast: stop when more than this share of a tensor's values would {what}",
        )
    p.add_argument(
        "--fraction",
        type=types.fraction,
        default=0.5,
        metavar="F",
        help="with --headroom: the share of the dtype's largest value that stops (default 0.5)",
    )


def run(session, args):
    a = session.staged()
    if args.glob == "off":
        a.above = a.below = None
        a.trace_batches = ()
        a.headroom = None
        a.cast, a.cast_limits = None, (None, None, None)
        a.touched |= {"thresholds", "trace", "headroom", "cast"}
        return session.apply(a)
    limits = (args.overflow, args.flush, args.subnormal)
    if args.cast is None and any(x is not None for x in limits):
        raise OvfError("ovf watch: --overflow, --flush and --subnormal need --cast TYPE")
    asked = (args.batches, args.above, args.below, args.headroom, args.cast)
    if all(x is None for x in asked):
        raise OvfError(
            "ovf watch: give --batches, --above, --below, --headroom or --cast (or 'off')"
        )
    glob = "" if args.glob in ("", "*") else args.glob
    if args.cast is not None:
        a.cast, a.cast_limits = args.cast, limits
        if any(x is not None for x in limits):
            a.watch_module = glob
        a.touched.add("cast")
    if args.headroom is not None:
        if args.above is not None:
            raise OvfError("ovf watch: --headroom sets the abs max threshold itself; drop --above")
        args.above = args.fraction * layout.HEADROOM_DTYPES[args.headroom][1]
        a.headroom = args.headroom
        a.touched.add("headroom")
    if args.above is not None or args.below is not None:
        a.above, a.below, a.watch_module = args.above, args.below, glob
        a.touched.add("thresholds")
    if args.batches is not None:
        a.trace_batches, a.trace_module = args.batches, glob
        a.touched.add("trace")
    return session.apply(a)
