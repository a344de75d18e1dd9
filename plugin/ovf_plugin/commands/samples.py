"""List the dataset indices behind the last batches.

The indices a DataLoader's sampler gave each of the last 16 batches (the first
64 of each), as the runtime kept them, and which rows of the first non-finite
value hold its NaN/Inf, read as samples of its batch. Works live and on core
files; the process keeps them in Python mode (python3 -m ovf, ovf.enable).
"""

from ovf_ring import samples

from . import types

NAME = "samples"


def add_arguments(p):
    p.add_argument(
        "--batch", type=types.batch_number, default=None, metavar="B", help="only batch B"
    )


def run(session, args):
    return samples.listing(session.ring(), args.batch)
