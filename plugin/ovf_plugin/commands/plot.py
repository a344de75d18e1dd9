"""Draw the ring as one picture: where the values blow up.

FILE (.png, .svg or .pdf) gets a heat map of log10 of each module's output
abs max, modules as rows in the order their forwards finished, frames (or,
with --batches, batches) as columns; non-finite cells in a colour of their own,
the first non-finite value and the latest event framed and labelled. Under it,
the abs max per batch of the modules closest to the limits, with the fp16 and
bf16 limits as reference lines. Live and on core files; the drawing runs here
in the debugger (matplotlib), never in the program. With more than 80 rows,
repeated blocks (layers.0 .. layers.11) fold into one row each.
"""

import json
import os

from ovf_ring import layout

from .. import plot
from . import types

NAME = "plot"


def add_arguments(p):
    p.add_argument("file", metavar="FILE", help="the picture to write: .png, .svg or .pdf")
    p.add_argument(
        "--module",
        type=types.module_glob,
        default=None,
        metavar="GLOB",
        help="only modules whose path matches (with --ops: ops run in them)",
    )
    p.add_argument(
        "--batches",
        action="store_true",
        help="one column per batch (each module's largest value in it), not one per frame",
    )
    p.add_argument(
        "--ops",
        action="store_true",
        help="the op observer's records as rows (ovf break-on-nan --ops), one per module and op",
    )
    p.add_argument(
        "--last",
        type=types.count,
        default=None,
        metavar="N",
        help=f"only the newest N columns (default: all the ring holds, at most {plot.MAX_COLUMNS})",
    )
    p.add_argument(
        "--cast",
        choices=layout.CAST_TARGETS,
        default=None,
        help=(
            "cells are the share of values a cast to this type would lose (--loss), where the"
            " cast counts were kept (ovf watch --cast, python3 -m ovf --cast-shares)"
        ),
    )
    p.add_argument(
        "--loss",
        choices=layout.CAST_LOSSES,
        default="overflow",
        help="with --cast: overflow (default), flush (to zero) or subnormal",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print what was drawn as one JSON object: rows, columns, the abs max matrix, marks",
    )


def run(session, args):
    ring = session.ring()
    target = session.target
    program = plot.script_of(ring)
    if not program and target.kind() == "live":
        program = plot.command_line(pid=ring.header.pid)
    options = plot.Options.from_args(args)
    # The core the debugger has open, and the one its command line named (a
    # relative name is the command line's: both may be looked at).
    cores = [target.core_file(), target.unopened_core_path()] if target.kind() == "core" else []
    drawn, text = plot.plot(
        ring, os.path.expanduser(args.file), options, program, inputs=[c for c in cores if c]
    )
    return json.dumps(drawn) + "\n" if args.json else text
