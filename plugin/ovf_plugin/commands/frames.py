"""List the last frames in the reference's report format.

The last N forward frames (default: the runtime's max_frames_to_save) with
"abs min  abs max  metadata" columns, as DebugUnderflowOverflow prints them,
from a live process or a core file. Filters keep the N newest frames that
match them all.
"""

import json

from ovf_ring import listing

from . import types

NAME = "frames"


def add_arguments(p):
    p.add_argument(
        "count",
        nargs="?",
        type=types.count,
        default=None,
        metavar="N",
        help="how many frames (default: the runtime's max_frames_to_save)",
    )
    p.add_argument(
        "--batch", type=types.batch_number, default=None, metavar="B", help="only batch B"
    )
    p.add_argument("--module", default=None, metavar="GLOB", help="only modules whose path matches")
    p.add_argument("--nonfinite", action="store_true", help="only frames with a NaN or Inf")
    p.add_argument("--json", action="store_true", help="one JSON object: frames with raw stats")
    p.add_argument(
        "--ops",
        action="store_true",
        help="also the op observer's records (ovf break-on-nan --ops), where the ops ran",
    )
    p.add_argument(
        "--all-ops",
        action="store_true",
        help=(
            "with --ops, or where op records are the frames (a C++ program): also the ops "
            "that only set memory up (zero_, fill_, zeros, ...), which are left out unless "
            "one of them is non-finite"
        ),
    )
    p.add_argument(
        "--headroom",
        action="store_true",
        help=(
            "each line's headroom (ovf watch --headroom): abs max as a share of the dtype's "
            "largest value, values below its smallest normal"
        ),
    )


def run(session, args):
    ring = session.ring()
    sel = listing.Selection(
        count=args.count,
        batch=args.batch,
        module=args.module,
        nonfinite=args.nonfinite,
        ops=args.ops,
        all_ops=args.all_ops,
        headroom=args.headroom,
    )
    if args.json:
        return json.dumps(listing.data(ring, sel), indent=1) + "\n"
    return listing.text(ring, sel)
